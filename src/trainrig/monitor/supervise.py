"""`trainrig monitor -- CMD` and `trainrig monitor --pid N`: record a job from outside it.

The wrapper creates the run, starts the command with the run's id in its environment (so an
in-process `trainrig.monitor()` in the job joins the run and adds its steps), follows the command's
process tree, and closes the run with the command's exit code. Attaching follows an existing
process tree until it exits. Both poll the database for the job's steps to show them live.

The job never outlives its monitor unseen: SIGTERM and SIGHUP sent to the monitor are passed on to
the job (SIGINT too, see `_interrupt`), and on Linux the job gets SIGTERM if the monitor dies, even
by SIGKILL (`PR_SET_PDEATHSIG`); the run then reads as `lost` (`store.effective_status`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from trainrig.errors import TrainrigError
from trainrig.monitor.exporter import LOOPBACK
from trainrig.monitor.live import LiveState, recent_step_figures
from trainrig.monitor.recording import ENV_DB, ENV_RUN, Recording, RecordingConfig
from trainrig.monitor.store import Store

__all__ = ["Supervisor", "LIVE_DIAGNOSIS_WINDOW_S", "exit_status", "FORWARDED_SIGNALS",
           "DEATH_SIGNAL", "DEFAULT_PROMETHEUS_HOST"]

LIVE_DIAGNOSIS_WINDOW_S = 120.0
"""The live view diagnoses the last two minutes; the report diagnoses the whole run."""
_DIAGNOSE_EVERY_S = 5.0
_INTERRUPT_GRACE_S = 10.0
FORWARDED_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))
"""Passed on to the job as they arrive; SIGINT is passed on by `_interrupt`."""
DEATH_SIGNAL = signal.SIGTERM
"""What the job gets when its monitor dies (Linux): SIGTERM lets it (or torchrun) clean up."""
DEFAULT_PROMETHEUS_HOST = LOOPBACK
"""The exporter listens on loopback unless `--prometheus-host` widens it on purpose."""
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def exit_status(code: int | None) -> str:
    """A run's status from its command's exit code (negative: ended by that signal; None: an
    attached process whose exit status an observer cannot know)."""
    if code is None:
        return "ended"
    if code < 0:
        return f"killed by {signal_name(-code)}"
    return "finished" if code == 0 else "failed"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def shell_exit_code(code: int) -> int:
    """The exit code a shell would give: 128 + N for a process ended by signal N."""
    return 128 - code if code < 0 else code


class Supervisor:
    """Records one run from outside the job; `refresh()` gives what a live view shows."""

    def __init__(self, store: Store, config: RecordingConfig, prometheus_port: int | None = None,
                 refresh_s: float = 0.5, prometheus_host: str = DEFAULT_PROMETHEUS_HOST) -> None:
        self.store, self.config = store, config
        self.prometheus_port, self.refresh_s = prometheus_port, refresh_s
        self.prometheus_host = prometheus_host
        self.recording: Recording | None = None
        self.exporter: Any = None
        self.command: list[str] | None = None
        self.forwarded: list[str] = []
        """Names of the signals passed on to the job."""
        self._process: subprocess.Popen | None = None
        self._early_signals: list[int] = []
        self._steps: deque[dict[str, Any]] = deque(maxlen=64)
        self._step_count, self._last_step_id = 0, 0
        self._findings: list[Any] = []
        self._diagnosed_at = 0.0
        self._started = time.monotonic()

    # -- ways in ---------------------------------------------------------------------------------
    def run(self, argv: Sequence[str], on_refresh: Callable[[LiveState], None] | None = None,
            stdout: Any = None) -> int:
        """Run `argv` under the monitor (its output to `stdout`, default ours); its exit code
        (negative: the signal that ended it)."""
        self.command = list(argv)
        self._start_exporter()  # a busy port is an error before the job starts, not after
        try:
            with self._forwarding():
                return self._run(argv, on_refresh, stdout)
        finally:
            self._stop_exporter()

    def _run(self, argv: Sequence[str], on_refresh: Callable[[LiveState], None] | None,
             stdout: Any) -> int:
        recording = Recording.create(self.store, self.config, argv, os.getpid())
        try:
            process = subprocess.Popen(list(argv), env=self._job_env(recording), stdout=stdout,
                                       preexec_fn=_die_with_monitor())
        except OSError as error:
            recording.stop("failed")
            raise TrainrigError("COMMAND", f"cannot run {argv[0]!r} ({error.strerror or error}).") \
                from None
        self._process = process
        for signum in self._early_signals:  # arrived while the job was being started
            self._forward(signum)
        self._begin(recording, process.pid)
        code = self._follow(lambda: process.poll() is None, on_refresh, process)
        self._end(exit_status(code), shell_exit_code(code))
        return code

    def _job_env(self, recording: Recording) -> dict[str, str]:
        """The run's id for the job's own monitor; not when the run lives in memory only (the
        job could not reach it)."""
        if self.store.memory_only:
            return dict(os.environ)
        return {**os.environ, ENV_RUN: str(recording.run_id), ENV_DB: str(self.store.path)}

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
        self._start_exporter()
        try:
            recording = Recording.create(self.store, self.config, self.command, os.getpid())
            self._begin(recording, pid)
            deadline = None if duration_s is None else time.monotonic() + duration_s
            self._follow(lambda: _alive(pid) and (deadline is None or time.monotonic() < deadline),
                         on_refresh)
            self._end(*_attached_outcome(pid))
        finally:
            self._stop_exporter()
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
            sampler_errors=sampler.errors, storage=self.store.storage_state())

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

    def _start_exporter(self) -> None:
        if self.prometheus_port is None:
            return
        from trainrig.monitor.exporter import PrometheusExporter

        self.exporter = PrometheusExporter(self._snapshot, self.prometheus_port,
                                           self.prometheus_host).start()

    def _stop_exporter(self) -> None:
        if self.exporter is not None:
            self.exporter.stop()
            self.exporter = None

    def _snapshot(self) -> Any:
        from trainrig.monitor.exporter import Snapshot

        sampler = self.recording.sampler if self.recording else None
        if sampler is None:  # scraped before sampling began
            return Snapshot()
        gpus = {g.index: g.to_dict() for g in (sampler.gpu.infos if sampler.gpu else [])}
        return Snapshot(list(sampler.latest_gpu), sampler.latest_host, gpus, self._live_steps())

    @contextlib.contextmanager
    def _forwarding(self) -> Iterator[None]:
        """While the job runs, SIGTERM and SIGHUP to the monitor go to the job; the monitor goes on
        following it and records how it ended. Only the main thread may set handlers."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {signum: signal.signal(signum, self._on_signal) for signum in FORWARDED_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._process is None:
            self._early_signals.append(signum)
            return
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        assert self._process is not None
        with contextlib.suppress(ProcessLookupError):
            self._process.send_signal(signum)
        self.forwarded.append(signal_name(signum))

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
        assert self.recording is not None
        if self.forwarded:
            self.store.set_meta(self.recording.run_id, {"signals_forwarded": self.forwarded})
        self.recording.stop(status, code)


def _die_with_monitor() -> Callable[[], None] | None:
    """Linux: a `preexec_fn` asking the kernel to send the job DEATH_SIGNAL when the monitor dies
    (PR_SET_PDEATHSIG, prctl(2)); elsewhere None. The kernel watches the thread that started the
    job, so `run` must be called from a thread that lives as long as the monitor (the CLI's main
    thread)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    monitor_pid = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(DEATH_SIGNAL), 0, 0, 0)
        if os.getppid() != monitor_pid:  # the monitor died before prctl took effect
            os.kill(os.getpid(), DEATH_SIGNAL)

    return preexec


def _alive(pid: int) -> bool:
    """Running, i.e. neither gone nor a zombie waiting for its parent to read its exit status."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _attached_outcome(pid: int) -> tuple[str, int | None]:
    """(status, exit code) of an attached process: `detached` if it still runs (--duration over);
    how it ended if it is a zombie (its status is readable until its parent reaps it); else
    `ended`, as an observer that is not its parent cannot know its exit status."""
    if _alive(pid):
        return "detached", None
    code = _zombie_exit_code(pid)
    return exit_status(code), None if code is None else shell_exit_code(code)


def _zombie_exit_code(pid: int) -> int | None:
    """Exit code (negative: the signal) from /proc/PID/stat's exit_code field (proc(5), Linux 3.5+)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    if len(fields) < 50 or fields[0] != "Z":
        return None
    status = int(fields[49])
    return -(status & 0x7F) if status & 0x7F else status >> 8


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
