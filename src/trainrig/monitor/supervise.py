"""`trainrig monitor -- CMD` and `trainrig monitor --pid N`: record a job from outside it.

The wrapper creates the run, starts the command with the run's id in its environment (so an
in-process `trainrig.monitor()` in the job joins the run and adds its steps), follows the command's
process tree, and closes the run with the command's exit code. Attaching follows an existing
process tree until it exits. Both poll the database for the job's steps to show them live.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from trainrig.errors import TrainrigError
from trainrig.monitor.live import LiveState, recent_step_figures
from trainrig.monitor.recording import ENV_DB, ENV_RUN, Recording, RecordingConfig
from trainrig.monitor.store import Store

__all__ = ["Supervisor", "LIVE_DIAGNOSIS_WINDOW_S", "exit_status"]

LIVE_DIAGNOSIS_WINDOW_S = 120.0
"""The live view diagnoses the last two minutes; the report diagnoses the whole run."""
_DIAGNOSE_EVERY_S = 5.0
_INTERRUPT_GRACE_S = 10.0


def exit_status(code: int) -> str:
    """A run's status from its command's exit code (negative: ended by a signal)."""
    return "finished" if code == 0 else "killed" if code < 0 else "failed"


class Supervisor:
    """Records one run from outside the job; `refresh()` gives what a live view shows."""

    def __init__(self, store: Store, config: RecordingConfig, prometheus_port: int | None = None,
                 refresh_s: float = 0.5) -> None:
        self.store, self.config = store, config
        self.prometheus_port, self.refresh_s = prometheus_port, refresh_s
        self.recording: Recording | None = None
        self.exporter: Any = None
        self.command: list[str] | None = None
        self._steps: deque[dict[str, Any]] = deque(maxlen=64)
        self._step_count, self._last_step_id = 0, 0
        self._findings: list[Any] = []
        self._diagnosed_at = 0.0
        self._started = time.monotonic()

    # -- ways in ---------------------------------------------------------------------------------
    def run(self, argv: Sequence[str], on_refresh: Callable[[LiveState], None] | None = None,
            stdout: Any = None) -> int:
        """Run `argv` under the monitor (its output to `stdout`, default ours); its exit code."""
        self.command = list(argv)
        recording = Recording.create(self.store, self.config, argv, os.getpid())
        env = {**os.environ, ENV_RUN: str(recording.run_id), ENV_DB: str(self.store.path)}
        try:
            process = subprocess.Popen(list(argv), env=env, stdout=stdout)
        except OSError as error:
            recording.stop("failed")
            raise TrainrigError("COMMAND", f"cannot run {argv[0]!r} ({error.strerror or error}).") \
                from None
        self._begin(recording, process.pid)
        code = self._follow(lambda: process.poll() is None, on_refresh, process)
        self._end(exit_status(code), code)
        return code

    def attach(self, pid: int, on_refresh: Callable[[LiveState], None] | None = None,
               duration_s: float | None = None) -> int:
        """Follow process `pid` and its children until it exits (or `duration_s` passes)."""
        import psutil

        try:
            self.command = psutil.Process(pid).cmdline()
        except psutil.NoSuchProcess:
            raise TrainrigError("--pid", f"no process {pid} on this host.") from None
        except psutil.AccessDenied:
            self.command = None
        recording = Recording.create(self.store, self.config, self.command, os.getpid())
        self._begin(recording, pid)
        deadline = None if duration_s is None else time.monotonic() + duration_s
        self._follow(lambda: psutil.pid_exists(pid) and (deadline is None
                                                        or time.monotonic() < deadline), on_refresh)
        self._end("finished", None)
        return recording.run_id

    @property
    def run_id(self) -> int | None:
        return self.recording.run_id if self.recording else None

    # -- live state ------------------------------------------------------------------------------
    def refresh(self) -> LiveState:
        """Read new steps from the database and, every few seconds, diagnose the recent window."""
        assert self.recording is not None and self.recording.sampler is not None
        for row in self.store.steps_after(self.recording.run_id, self._last_step_id):
            self._steps.append(row)
            self._last_step_id = row["id"]
            self._step_count += 1
        meta = self.store.meta(self.recording.run_id)
        if time.monotonic() - self._diagnosed_at >= _DIAGNOSE_EVERY_S:
            self._diagnose()
        sampler = self.recording.sampler
        from trainrig.monitor.analysis import merged_workload
        from trainrig.monitor.gpu import GpuInfo

        gpus = [GpuInfo.from_dict(g) for g in meta.get("gpus", [])]
        return LiveState(
            run_id=self.recording.run_id, command=self.command,
            elapsed_s=time.monotonic() - self._started, gpus=[g.to_dict() for g in gpus],
            gpu_rows=list(sampler.latest_gpu), host_row=sampler.latest_host,
            host=meta.get("host", {}),
            step_figures=recent_step_figures(list(self._steps), self._step_count,
                                             merged_workload(meta, gpus)),
            findings=self._findings, nvml_reason=meta.get("nvml", {}).get("reason"),
            sampler_errors=sampler.errors)

    def _diagnose(self) -> None:
        from trainrig.monitor.diagnose import diagnose

        self._diagnosed_at = time.monotonic()
        assert self.recording is not None
        self.recording.sampler.flush()
        data = self.store.load(self.recording.run_id, since=time.time() - LIVE_DIAGNOSIS_WINDOW_S)
        self._findings = diagnose(data, int(data.meta.get("warmup_steps", 1)))[0]

    # -- internals -------------------------------------------------------------------------------
    def _begin(self, recording: Recording, root_pid: int) -> None:
        self.recording = recording
        recording.start(root_pid)
        if self.prometheus_port is not None:
            from trainrig.monitor.exporter import PrometheusExporter

            self.exporter = PrometheusExporter.for_sampler(
                recording.sampler, None, self.prometheus_port, self._live_steps).start()

    def _live_steps(self) -> dict[str, float | None]:
        from trainrig.monitor.analysis import merged_workload
        from trainrig.monitor.gpu import GpuInfo

        assert self.recording is not None
        meta = self.store.meta(self.recording.run_id)
        gpus = [GpuInfo.from_dict(g) for g in meta.get("gpus", [])]
        rows = self.store.steps_after(self.recording.run_id, max(0, self._last_step_id - 64))
        return recent_step_figures(rows[-64:], self._step_count or len(rows),
                                   merged_workload(meta, gpus))

    def _follow(self, running: Callable[[], bool],
                on_refresh: Callable[[LiveState], None] | None,
                process: subprocess.Popen | None = None) -> int:
        try:
            while running():
                if on_refresh is not None:
                    on_refresh(self.refresh())
                time.sleep(self.refresh_s)
        except KeyboardInterrupt:
            if process is not None:
                _interrupt(process)
        if process is None:
            return 0
        return process.wait()

    def _end(self, status: str, code: int | None) -> None:
        if self.exporter is not None:
            self.exporter.stop()
        assert self.recording is not None
        self.recording.stop(status, code)


def _interrupt(process: subprocess.Popen) -> None:
    """Ctrl-C from a terminal reaches the job too (same process group): let it stop; forward the
    interrupt if it did not get one, then terminate it if it still runs."""
    try:
        process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=_INTERRUPT_GRACE_S)
        except subprocess.TimeoutExpired:
            process.terminate()
    except KeyboardInterrupt:
        process.kill()
