"""The background sampler: reads GPUs and host at 1–10 Hz, drains steps, flushes to the store.

One daemon thread. Each tick appends rows to in-memory buffers; every `flush_interval_s` the
buffers go to SQLite in one committed transaction (a flush). A sample is therefore readable at most
`flush_interval_s` after it was taken, even if the process is killed right after the flush.
Monitoring never stops training: an error in a tick is counted (`errors`, `last_error`) and the
next tick goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from trainrig.errors import TrainrigError
from trainrig.monitor.gpu import GpuSource
from trainrig.monitor.host import HostSource
from trainrig.monitor.steps import StepRecorder
from trainrig.monitor.store import Store

__all__ = ["Sampler", "HZ_RANGE", "check_hz"]

HZ_RANGE = (1.0, 10.0)
MAX_BUFFERED_ROWS = 100_000
"""Rows kept while the database refuses writes; older ones are dropped beyond this."""


def check_hz(hz: float, field: str = "hz") -> float:
    low, high = HZ_RANGE
    if not low <= float(hz) <= high:
        raise TrainrigError(field, f"must be between {low:g} and {high:g} samples per second "
                                   f"(got {hz:g}).")
    return float(hz)


class Sampler:
    """Samples `gpu` and `host` at `hz` and drains `steps`, writing run `run_id` to `store`."""

    def __init__(self, store: Store, run_id: int, *, gpu: GpuSource | None = None,
                 host: HostSource | None = None, steps: StepRecorder | None = None,
                 hz: float = 10.0, flush_interval_s: float = 1.0,
                 on_flush: Callable[[Sampler], None] | None = None) -> None:
        self.store, self.run_id = store, run_id
        self.gpu, self.host, self.steps = gpu, host, steps
        self.period_s = 1.0 / check_hz(hz)
        self.flush_interval_s = flush_interval_s
        self.on_flush = on_flush
        self.latest_gpu: list[dict[str, Any]] = []
        self.latest_host: dict[str, Any] | None = None
        self.flushed = {"gpu_samples": 0, "host_samples": 0, "steps": 0}
        self.errors, self.last_error = 0, None
        self._buffers: dict[str, list[dict[str, Any]]] = {k: [] for k in self.flushed}
        self._buffer_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._flushed_at = time.monotonic()

    @property
    def has_sources(self) -> bool:
        return self.gpu is not None or self.host is not None

    def start(self) -> Sampler:
        if self.gpu is not None:
            self.gpu.start()
        self._thread = threading.Thread(target=self._run, name="trainrig-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread, then take the remaining steps and flush everything."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.flush()
        if self.gpu is not None:
            self.gpu.close()

    def tick(self) -> None:
        """Take one sample of every source."""
        rows = self.gpu.read() if self.gpu is not None else []
        row = self.host.read() if self.host is not None else None
        with self._buffer_lock:
            if self.gpu is not None:
                self.latest_gpu = rows
                self._buffers["gpu_samples"].extend(rows)
            if row is not None:
                self.latest_host = row
                self._buffers["host_samples"].append(row)

    def flush(self) -> None:
        """Write the buffered rows and the closed steps in one transaction; keep them for the next
        try if the write fails. Safe to call from any thread."""
        with self._buffer_lock:
            self._flushed_at = time.monotonic()
            self._drain_steps()
            batch = self._buffers
            if not any(batch.values()):
                return
            self._buffers = {k: [] for k in self.flushed}
            self._write(batch)

    def _write(self, batch: dict[str, list[dict[str, Any]]]) -> None:
        try:
            self.store.write(self.run_id, batch["gpu_samples"], batch["host_samples"],
                             batch["steps"])
        except Exception as error:  # noqa: BLE001 - the job must go on; retry next flush
            self._note_error(error)
            for key, rows in batch.items():
                self._buffers[key] = (rows + self._buffers[key])[-MAX_BUFFERED_ROWS:]
            return
        for key, rows in batch.items():
            self.flushed[key] += len(rows)
        if self.on_flush is not None:
            self.on_flush(self)

    def _run(self) -> None:
        period = self.period_s if self.has_sources else self.flush_interval_s
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.tick()
                if time.monotonic() - self._flushed_at >= self.flush_interval_s:
                    self.flush()
            except Exception as error:  # noqa: BLE001 - never let monitoring kill the job
                self._note_error(error)
            next_at += period
            now = time.monotonic()
            if next_at < now:  # fell behind (slow NVML, busy host): skip, do not burst
                next_at = now
            self._stop.wait(next_at - now)

    def _drain_steps(self) -> None:
        if self.steps is not None:
            self._buffers["steps"].extend(self.steps.drain())

    def _note_error(self, error: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{type(error).__name__}: {error}"
