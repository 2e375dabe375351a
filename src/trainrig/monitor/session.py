"""The in-process monitor: `with trainrig.monitor(...) as m:`, `m.data(loader)`, `m.step(tokens=…)`.

Alone, it records a run of its own: a daemon thread samples GPUs (NVML) and the host (psutil) at
`hz` and flushes to SQLite. Under `trainrig monitor -- …` (the environment carries the run id) it
joins the wrapper's run instead: the wrapper samples, this process only records its steps and what
it computes (FLOPs per token, peak), so the steps land in the same run.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from trainrig.errors import TrainrigError
from trainrig.monitor.recording import ENV_DB, ENV_RUN, TRAINER_PID_PREFIX, Recording, RecordingConfig
from trainrig.monitor.sampler import Sampler
from trainrig.monitor.steps import StepRecorder
from trainrig.monitor.store import Store
from trainrig.monitor.workload import estimate_summary, load_job_input, resolve_workload
from trainrig.units import GIB

__all__ = ["Monitor", "monitor"]

T = TypeVar("T")


def monitor(*, name: str | None = None, hz: float = 2.0, job: Any = None, model: Any = None,
            seq_len: int | None = None, flops_per_token: float | None = None,
            peak_tflops: float | None = None, precision: str | None = None,
            devices: int | None = None, micro_batch: int | None = None,
            memory_limit_gib: float | None = None, gpus: Sequence[int] | None = None,
            home: str | os.PathLike | None = None, prometheus_port: int | None = None,
            nvml_backend: Any = None, flush_interval_s: float = 1.0,
            warmup_steps: int = 1) -> Monitor:
    """A monitor for this training process; use it as a context manager (or `start()`/`stop()`).

    job: a job file (path or mapping) or Job: its estimate is compared with the measured steps,
        and it supplies FLOPs per token and the GPU peak for MFU.
    model, seq_len: a model (preset, config.json path or mapping) to count FLOPs per token.
    flops_per_token: FLOPs per trained token directly (e.g. 6 × parameters).
    peak_tflops: the dense peak per device for MFU (default: the job's GPU, else the catalog
        entry of the GPU NVML reports, at `precision`).
    devices: devices the reported tokens were trained on (default: the ranks that report).
    memory_limit_gib: the job's host-memory budget, when lower than RAM and cgroup limits.
    nvml_backend: a fake NVML backend (`trainrig.probe.nvml_fake.FakeNvml`) instead of the real one.
    """
    return Monitor(name=name, hz=hz, job=job, model=model, seq_len=seq_len,
                   flops_per_token=flops_per_token, peak_tflops=peak_tflops, precision=precision,
                   devices=devices, micro_batch=micro_batch, memory_limit_gib=memory_limit_gib,
                   gpus=gpus, home=home, prometheus_port=prometheus_port,
                   nvml_backend=nvml_backend, flush_interval_s=flush_interval_s,
                   warmup_steps=warmup_steps)


class Monitor:
    """See `monitor()`. `data()` times the wait for each batch, `step()` closes a step."""

    def __init__(self, *, name: str | None, hz: float, job: Any, model: Any, seq_len: int | None,
                 flops_per_token: float | None, peak_tflops: float | None, precision: str | None,
                 devices: int | None, micro_batch: int | None, memory_limit_gib: float | None,
                 gpus: Sequence[int] | None, home: Any, prometheus_port: int | None,
                 nvml_backend: Any, flush_interval_s: float, warmup_steps: int) -> None:
        job_spec = load_job_input(job)
        workload = resolve_workload(job=job_spec, model=model, seq_len=seq_len,
                                    flops_per_token=flops_per_token, peak_tflops=peak_tflops,
                                    precision=precision, devices=devices, micro_batch=micro_batch)
        _check_limits(memory_limit_gib, flush_interval_s, warmup_steps, prometheus_port)
        self.config = RecordingConfig(
            hz=hz, flush_interval_s=flush_interval_s, name=name or _script_name(),
            gpus=gpus, nvml_backend=nvml_backend,
            memory_limit_bytes=int(memory_limit_gib * GIB) if memory_limit_gib else None,
            warmup_steps=warmup_steps, workload=workload, estimate=estimate_summary(job_spec))
        self.home, self.prometheus_port = home, prometheus_port
        self.rank = _rank()
        self.steps = StepRecorder(self.rank)
        self.store: Store | None = None
        self.run_id: int | None = None
        self.joined = False
        self._recording: Recording | None = None
        self._flusher: Sampler | None = None
        self._exporter: Any = None

    # -- life cycle --------------------------------------------------------------------------
    def start(self) -> Monitor:
        if self.store is not None:
            return self
        if os.environ.get(ENV_RUN) and os.environ.get(ENV_DB):
            self._join(int(os.environ[ENV_RUN]), os.environ[ENV_DB])
        else:
            self._record()
        atexit.register(self._at_exit)
        return self

    def stop(self, status: str = "finished", exit_code: int | None = None) -> None:
        """Flush what is left; close the run unless it belongs to `trainrig monitor`."""
        if self.store is None:
            return
        atexit.unregister(self._at_exit)
        if self._exporter is not None:
            self._exporter.stop()
            self._exporter = None
        if self._recording is not None:
            self._recording.stop(status, exit_code)
            self._recording = None
        if self._flusher is not None:
            self._flusher.stop()
            self._flusher = None
        self._keep_storage_state()

    def _keep_storage_state(self) -> None:
        """A job that joined a run says in it whether the disk refused its steps; rows still
        unwritten are lost when this process exits: say so on stderr."""
        assert self.store is not None
        state = self.store.storage_state()
        if state and self.joined and self.run_id is not None:
            self.store.set_meta(self.run_id, {f"storage:rank{self.rank}": state})
        _warn_if_unwritten(self.store)

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.stop("failed" if exc_type is not None else "finished")

    # -- the training loop ---------------------------------------------------------------------
    def data(self, iterable: Iterable[T]) -> Iterator[T]:
        """`for batch in m.data(loader):` — times the wait for each batch."""
        return self.steps.data(iterable)

    def step(self, tokens: int | None = None) -> float:
        """Close a step (`tokens`: tokens this process trained on in it); returns its seconds."""
        return self.steps.step(tokens)

    def begin_step(self) -> None:
        """For callbacks without a loader wrapper: the time since the last step was data wait."""
        self.steps.begin()

    # -- results -------------------------------------------------------------------------------
    def report(self) -> Any:
        """The `RunReport` of the run so far (steps flushed first)."""
        if self.store is None or self.run_id is None:
            raise TrainrigError("monitor", "is not started: use `with trainrig.monitor() as m:`.")
        if self.sampler is not None:
            self.sampler.flush()
        from trainrig.monitor.analysis import analyze

        return analyze(self.store.load(self.run_id))

    @property
    def sampler(self) -> Sampler | None:
        return self._recording.sampler if self._recording else self._flusher

    def hf_callback(self, tokens_per_step: int | None = None) -> Any:
        """A Hugging Face `TrainerCallback` that records each optimizer step."""
        from trainrig.monitor.integrations import hf_callback

        return hf_callback(self, tokens_per_step)

    def lightning_callback(self, tokens_per_step: int | None = None) -> Any:
        """A PyTorch Lightning `Callback` that records each training batch."""
        from trainrig.monitor.integrations import lightning_callback

        return lightning_callback(self, tokens_per_step)

    # -- internals -----------------------------------------------------------------------------
    def _record(self) -> None:
        from trainrig.monitor.home import database_path

        self.store = Store.open(database_path(self.home), memory_if_full=True)
        self._recording = Recording.create(self.store, self.config, [sys.executable, *sys.argv],
                                           os.getpid())
        self.run_id = self._recording.run_id
        pid = os.getpid()
        self._recording.start(pid, steps=self.steps, trainer_pids=lambda: {pid})
        if self.prometheus_port is not None:
            from trainrig.monitor.exporter import PrometheusExporter

            self._exporter = PrometheusExporter.for_sampler(self._recording.sampler, self.steps,
                                                            self.prometheus_port).start()

    def _join(self, run_id: int, db_path: str) -> None:
        self.store = Store.open(db_path, memory_if_full=True)
        self.run_id, self.joined = run_id, True
        self.store.set_meta(run_id, {f"workload:rank{self.rank}": self.config.workload,
                                     f"{TRAINER_PID_PREFIX}{self.rank}": os.getpid()})
        if self.config.estimate and self.rank == 0:
            self.store.set_meta(run_id, {"estimate": self.config.estimate})
        self._flusher = Sampler(self.store, run_id, steps=self.steps, hz=self.config.hz,
                                flush_interval_s=self.config.flush_interval_s).start()

    def _at_exit(self) -> None:
        self.stop("finished")


def _warn_if_unwritten(store: Store) -> None:
    """Rows still held for a full disk are lost when this process exits: say so on stderr."""
    from trainrig.report.monitor_report import exit_storage_warning

    warning = exit_storage_warning(store.storage_state(), "This process is ending")
    if warning:
        sys.stderr.write(f"trainrig.monitor: {warning}\n")


def _rank() -> int:
    value = os.environ.get("RANK", "0")
    return int(value) if value.isdigit() else 0


def _script_name() -> str | None:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else None


def _check_limits(memory_limit_gib: float | None, flush_interval_s: float, warmup_steps: int,
                  prometheus_port: int | None) -> None:
    if memory_limit_gib is not None and not memory_limit_gib > 0:
        raise TrainrigError("memory_limit_gib", f"must be a positive number (got {memory_limit_gib!r}).")
    if not 0.05 <= flush_interval_s <= 60:
        raise TrainrigError("flush_interval_s", f"must be between 0.05 and 60 s (got {flush_interval_s!r}).")
    if warmup_steps < 0:
        raise TrainrigError("warmup_steps", f"must be 0 or more (got {warmup_steps!r}).")
    if prometheus_port is not None and not 0 <= prometheus_port <= 65535:
        raise TrainrigError("prometheus_port", f"must be a TCP port 0–65535 (got {prometheus_port!r}).")
