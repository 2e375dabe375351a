"""Monitor a live training job: GPU/host signals, step times, live MFU, diagnosis with advice.

`trainrig.monitor(...)` is the in-process API; the CLI verbs are `trainrig monitor`,
`trainrig runs` and `trainrig report`. Nothing heavy is imported here: psutil, NVML and SQLite load
when a monitor is created.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainrig.monitor.session import Monitor

__all__ = ["monitor", "FINDING_KINDS"]


def monitor(*, name: str | None = None, hz: float = 2.0, job: Any = None, model: Any = None,
            seq_len: int | None = None, flops_per_token: float | None = None,
            peak_tflops: float | None = None, precision: str | None = None,
            devices: int | None = None, micro_batch: int | None = None,
            memory_limit_gib: float | None = None, gpus: Sequence[int] | None = None,
            home: str | os.PathLike | None = None, prometheus_port: int | None = None,
            nvml_backend: Any = None, flush_interval_s: float = 1.0,
            warmup_steps: int = 1) -> Monitor:
    """A monitor for this training process: `with trainrig.monitor(job="job.yaml") as m:`.

    `for batch in m.data(loader):` times the wait for each batch, `m.step(tokens=n)` closes a step,
    `m.report()` gives the run's report; `m.hf_callback()` / `m.lightning_callback()` hook a
    Hugging Face or Lightning Trainer instead. Under `trainrig monitor -- …` the steps go into the
    wrapper's run. Arguments are described in `trainrig.monitor.session.monitor`; bad values raise
    `TrainrigError` naming the argument.
    """
    from trainrig.monitor.session import monitor as make

    return make(name=name, hz=hz, job=job, model=model, seq_len=seq_len,
                flops_per_token=flops_per_token, peak_tflops=peak_tflops, precision=precision,
                devices=devices, micro_batch=micro_batch, memory_limit_gib=memory_limit_gib,
                gpus=gpus, home=home, prometheus_port=prometheus_port, nvml_backend=nvml_backend,
                flush_interval_s=flush_interval_s, warmup_steps=warmup_steps)


def __getattr__(name: str) -> Any:
    if name == "FINDING_KINDS":
        from trainrig.monitor.findings import FINDING_KINDS

        return FINDING_KINDS
    raise AttributeError(name)
