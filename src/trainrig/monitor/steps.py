"""Step timing inside the training loop: the wait for each batch and the end of each step.

Cheap by design: `step()` reads the clock once and appends a tuple; the sampler thread drains the
pending steps into the database. Durations use `time.perf_counter`; `t_end` is wall-clock time so
steps line up with samples taken by another process.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["StepRecorder"]

T = TypeVar("T")
RECENT_STEPS = 64


class StepRecorder:
    """Times steps of one process (`rank`)."""

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self.count = 0
        self._offset_s = time.time() - time.perf_counter()
        self._mark = time.perf_counter()
        self._started = False
        self._wait_s = 0.0
        self._pending: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_STEPS)

    def data(self, iterable: Iterable[T]) -> Iterator[T]:
        """Yield from `iterable`, timing each wait for the next item as data wait."""
        iterator = iter(iterable)
        while True:
            start = time.perf_counter()
            if not self._started:
                self._start(start)
            try:
                item = next(iterator)
            except StopIteration:
                return
            self._wait_s += time.perf_counter() - start
            yield item

    def begin(self) -> None:
        """For callbacks: the step starts now; the time since the previous step ended was waiting."""
        now = time.perf_counter()
        if not self._started:
            self._start(now)
        else:
            self._wait_s += now - self._mark

    def add_wait(self, seconds: float) -> None:
        self._wait_s += seconds

    def step(self, tokens: int | None = None) -> float:
        """Close a step; returns its duration in seconds."""
        now = time.perf_counter()
        self._started = True
        step_s = now - self._mark
        record = {"rank": self.rank, "step": self.count, "t_end": now + self._offset_s,
                  "step_s": step_s, "data_wait_s": min(self._wait_s, step_s),
                  "tokens": int(tokens) if tokens is not None else None}
        self.count += 1
        self._mark, self._wait_s = now, 0.0
        with self._lock:
            self._pending.append(record)
        self.recent.append(record)
        return step_s

    def drain(self) -> list[dict[str, Any]]:
        """The steps closed since the last drain."""
        with self._lock:
            pending, self._pending = self._pending, []
        return pending

    def _start(self, now: float) -> None:
        """The first step starts at the first wait for data (not when the monitor was created)."""
        self._started = True
        self._mark, self._wait_s = now, 0.0
