"""A run being recorded: its row in the store, its GPU and host sources, and the sampler thread.

Shared by the in-process monitor (the job records itself) and `trainrig monitor` (a wrapper records
a command or an attached process tree). The run is created first, so its id can be handed to a
child process before the process tree to follow exists.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainrig.monitor.gpu import GpuSource
from trainrig.monitor.host import HostSource, host_info
from trainrig.monitor.sampler import Sampler, check_hz
from trainrig.monitor.steps import StepRecorder
from trainrig.monitor.store import Store

__all__ = ["RecordingConfig", "Recording", "ENV_RUN", "ENV_DB", "TRAINER_PID_PREFIX"]

ENV_RUN = "TRAINRIG_MONITOR_RUN"
"""Set by `trainrig monitor --` for the command it runs: the run the job's own monitor joins."""
ENV_DB = "TRAINRIG_MONITOR_DB"
TRAINER_PID_PREFIX = "trainer_pid:rank"


@dataclass
class RecordingConfig:
    """How to record: rate, flush interval, which GPUs, which NVML backend, what to store with it."""

    hz: float = 10.0
    flush_interval_s: float = 1.0
    name: str | None = None
    gpus: Sequence[int] | None = None
    nvml_backend: Any = None
    memory_limit_bytes: int | None = None
    warmup_steps: int = 1
    workload: dict[str, Any] = field(default_factory=dict)
    estimate: dict[str, Any] | None = None
    gpm_window_s: float = 0.2

    def __post_init__(self) -> None:
        check_hz(self.hz)


class Recording:
    """Create with `Recording.create`, then `start(root_pid)`, then `stop(status)`."""

    def __init__(self, store: Store, run_id: int, config: RecordingConfig) -> None:
        self.store, self.run_id, self.config = store, run_id, config
        self.sampler: Sampler | None = None
        self.gpu: GpuSource | None = None

    @classmethod
    def create(cls, store: Store, config: RecordingConfig, command: Sequence[str] | None,
               pid: int | None) -> Recording:
        run_id = store.create_run(config.name, command, pid)
        store.set_meta(run_id, {
            "workload": config.workload, "estimate": config.estimate,
            "warmup_steps": config.warmup_steps,
            "sampling": {"hz": config.hz, "flush_interval_s": config.flush_interval_s},
            "host": host_info(config.memory_limit_bytes)})
        return cls(store, run_id, config)

    def start(self, root_pid: int | None, steps: StepRecorder | None = None,
              trainer_pids: Callable[[], set[int]] | None = None,
              on_flush: Callable[[Sampler], None] | None = None) -> Recording:
        """Open NVML, start following the process tree at `root_pid`, start sampling."""
        self.gpu = GpuSource.open(self.config.nvml_backend, self.config.gpus,
                                  self.config.gpm_window_s)
        self.store.set_meta(self.run_id, {
            "gpus": [g.to_dict() for g in self.gpu.infos],
            "nvml": {"available": bool(self.gpu.infos), "reason": self.gpu.unavailable_reason}})
        host = HostSource(root_pid, trainer_pids or self.registered_trainers)
        self.sampler = Sampler(self.store, self.run_id, gpu=self.gpu if self.gpu.infos else None,
                               host=host, steps=steps, hz=self.config.hz,
                               flush_interval_s=self.config.flush_interval_s, on_flush=on_flush)
        self.sampler.start()
        return self

    def registered_trainers(self) -> set[int]:
        """Processes whose in-process monitor joined this run (they register their pid)."""
        meta = self.store.meta(self.run_id)
        return {int(v) for k, v in meta.items() if k.startswith(TRAINER_PID_PREFIX)}

    def stop(self, status: str, exit_code: int | None = None) -> None:
        """Flush, close the run, and keep its summary (steps, findings) for `trainrig runs`."""
        if self.sampler is not None:
            self.sampler.stop()
            self.store.set_meta(self.run_id, {"sampler": self.sampler_state()})
        self.store.finish_run(self.run_id, status, exit_code, time.time())
        from trainrig.monitor.runs import store_summary

        store_summary(self.store, self.run_id)
        storage = self.store.storage_state()
        if storage:  # the report must say that the disk was full
            self.store.set_meta(self.run_id, {"storage": storage})

    def sampler_state(self) -> dict[str, Any]:
        s = self.sampler
        if s is None:
            return {}
        return {"errors": s.errors, "last_error": s.last_error, "flushed": dict(s.flushed),
                "pid": os.getpid()}
