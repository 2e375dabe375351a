"""Watch GPUs through NVML while benchmarks load them: clocks, power, heat, link, slowdown reasons.

A GPU reads very differently idle and busy (the PCIe link drops to Gen1, clocks fall, power caps
and thermal slowdowns only show under load), so the verdicts use what was seen during the run.
"""

from __future__ import annotations

import statistics
import threading
from typing import Any

from trainrig.probe.nvml import NA, GpuSample, Nvml
from trainrig.probe.results import LoadObservation

__all__ = ["NvmlWatcher", "summarize_load", "BUSY_UTILIZATION_PCT"]

BUSY_UTILIZATION_PCT = 50
"""A sample counts as "under load" when NVML's utilization.gpu is at least this."""


class NvmlWatcher:
    """Samples every GPU every `interval_s` on a background thread between `start` and `stop`."""

    def __init__(self, nvml: Nvml, indices: list[int], interval_s: float = 0.25) -> None:
        self.nvml, self.indices, self.interval_s = nvml, indices, interval_s
        self.samples: dict[int, list[GpuSample]] = {i: [] for i in indices}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._nvml_lock = threading.Lock()

    def start(self) -> NvmlWatcher:
        self._thread = threading.Thread(target=self._run, name="trainrig-nvml-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[int, LoadObservation]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.nvml.close()
        with self._lock:
            return {i: summarize_load(s) for i, s in self.samples.items() if s}

    def link(self, index: int) -> tuple[int | None, int | None]:
        """The PCIe generation and width right now (for the PCIe benchmark)."""
        with self._nvml_lock:
            sample = self.nvml.sample(index)
        return _none(sample.pcie_gen_current), _none(sample.pcie_width_current)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for index in self.indices:
                with self._nvml_lock:  # one NVML session, one caller at a time
                    sample = self.nvml.sample(index)
                with self._lock:
                    self.samples[index].append(sample)


def summarize_load(samples: list[GpuSample]) -> LoadObservation:
    """What the busy samples show (all samples when none reached the busy threshold)."""
    busy = [s for s in samples if _int(s.utilization_gpu_pct) >= BUSY_UTILIZATION_PCT] or samples
    clocks = [s.sm_clock_mhz for s in busy if s.sm_clock_mhz is not NA]
    reasons: dict[str, None] = {}
    for s in busy:
        if s.slowdown_reasons is not NA:
            reasons.update(dict.fromkeys(s.slowdown_reasons))
    return LoadObservation(
        samples=len(busy),
        utilization_gpu_pct_max=_max(s.utilization_gpu_pct for s in samples),
        sm_clock_mhz_min=min(clocks) if clocks else None,
        sm_clock_mhz_median=statistics.median(clocks) if clocks else None,
        power_w_max=_max(s.power_w for s in busy),
        temperature_c_max=_max(s.temperature_c for s in busy),
        pcie_gen_max_seen=_max(s.pcie_gen_current for s in samples),
        pcie_width_max_seen=_max(s.pcie_width_current for s in samples),
        slowdown_reasons=list(reasons),
    )


def _max(values: Any) -> Any:
    present = [v for v in values if v is not NA]
    return max(present) if present else None


def _int(value: Any) -> int:
    return -1 if value is NA else int(value)


def _none(value: Any) -> Any:
    return None if value is NA else value

