"""GPU signals over time, through the NVML layer (`trainrig.probe.nvml`): one row per GPU per tick.

A thin adapter: `Nvml.sample` gives the instantaneous figures; NVLink rates come from the deltas of
NVML's cumulative KiB counters; SM / tensor / DRAM activity comes from NVML GPM (Hopper and newer,
the same quantities as DCGM's profiling fields) measured by a background poller over a window,
because `Nvml.gpm` blocks for its interval. Whatever NVML cannot give is None (N/A) in the row.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from trainrig.monitor.schema import GPU_COLUMNS, column_names
from trainrig.probe.nvml import GpmActivity, GpuSample, Nvml, NvmlUnavailable, na_to_none

__all__ = ["GpuInfo", "GpuSource", "KIB"]

KIB = 1024
_DIRECT = tuple(n for n in column_names(GPU_COLUMNS)
                if n not in {"nvlink_tx_gbs", "nvlink_rx_gbs", "sm_active_pct", "tensor_active_pct",
                             "dram_active_pct"})
_GPM_FIELDS = ("sm_active_pct", "tensor_active_pct", "dram_active_pct")


@dataclass(frozen=True)
class GpuInfo:
    """What one GPU is (read once), with its catalog entry's figures where it matched one."""

    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    memory_total_bytes: int | None
    sm_clock_max_mhz: int | None
    mem_clock_max_mhz: int | None
    power_limit_default_w: float | None
    pcie_gen_max: int | None
    pcie_width_max: int | None
    pcie_gen_gpu_max: int | None
    temperature_slowdown_c: int | None
    nvlink_links: int
    gpm_supported: bool | None
    catalog_id: str | None = None
    peak_tflops: dict[str, float] = field(default_factory=dict)
    nvlink_gbs: float | None = None
    """Catalog scale-up bandwidth per GPU, both directions together (GB/s)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuInfo:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


class GpuSource:
    """Samples the chosen GPUs; `read()` gives one row per GPU (column → value or None)."""

    def __init__(self, nvml: Nvml | None, indices: Sequence[int] = (), gpm_window_s: float = 0.2,
                 unavailable_reason: str | None = None) -> None:
        self.nvml = nvml
        self.indices = list(indices)
        self.unavailable_reason = unavailable_reason
        self.infos = [_info(nvml, i) for i in self.indices] if nvml is not None else []
        self._last_nvlink: dict[int, tuple[float, Any, Any]] = {}
        gpm_gpus = [g.index for g in self.infos if g.gpm_supported]
        self._gpm = _GpmPoller(nvml, gpm_gpus, gpm_window_s) if nvml and gpm_gpus else None

    @classmethod
    def open(cls, backend: Any | None = None, gpus: Sequence[int] | None = None,
             gpm_window_s: float = 0.2) -> GpuSource:
        """NVML on `backend` (default the real one); no GPUs, with the reason, where it cannot start."""
        try:
            nvml = Nvml.open(backend)
        except NvmlUnavailable as error:
            return cls(None, unavailable_reason=str(error))
        count = nvml.device_count()
        indices = [i for i in (gpus if gpus is not None else range(count)) if 0 <= i < count]
        reason = None if indices else "NVML found no GPU"
        return cls(nvml, indices, gpm_window_s, reason)

    def start(self) -> None:
        if self._gpm is not None:
            self._gpm.start()

    def close(self) -> None:
        if self._gpm is not None:
            self._gpm.stop()
        if self.nvml is not None:
            self.nvml.close()
            self.nvml = None

    def read(self) -> list[dict[str, Any]]:
        """One row per GPU, now."""
        if self.nvml is None:
            return []
        return [self._row(self.nvml.sample(i)) for i in self.indices]

    def _row(self, sample: GpuSample) -> dict[str, Any]:
        row: dict[str, Any] = {"t": sample.timestamp_s, "gpu": sample.index}
        for name in _DIRECT:
            row[name] = na_to_none(getattr(sample, name))
        row["nvlink_tx_gbs"], row["nvlink_rx_gbs"] = self._nvlink_rates(sample)
        activity = self._gpm.latest(sample.index) if self._gpm is not None else None
        for name in _GPM_FIELDS:
            row[name] = na_to_none(getattr(activity, name)) if activity is not None else None
        return row

    def _nvlink_rates(self, sample: GpuSample) -> tuple[float | None, float | None]:
        """GB/s from the change of NVML's cumulative KiB counters since the previous sample."""
        now = (sample.timestamp_s, na_to_none(sample.nvlink_tx_kib_total),
               na_to_none(sample.nvlink_rx_kib_total))
        before = self._last_nvlink.get(sample.index)
        self._last_nvlink[sample.index] = now
        if before is None or now[0] <= before[0]:
            return None, None
        dt_s = now[0] - before[0]
        return tuple(  # type: ignore[return-value]
            None if a is None or b is None or a < b else (a - b) * KIB / dt_s / 1e9
            for a, b in zip(now[1:], before[1:], strict=True))


class _GpmPoller:
    """Measures GPM activity of each GPU in turn, over `window_s`, on its own thread and NVML
    session (the layer's `last_reason` is per session, so threads do not share one)."""

    def __init__(self, nvml: Nvml, indices: list[int], window_s: float) -> None:
        self.backend, self.indices, self.window_s = nvml.backend, indices, window_s
        self._latest: dict[int, GpmActivity] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="trainrig-gpm", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def latest(self, index: int) -> GpmActivity | None:
        return self._latest.get(index)

    def _run(self) -> None:
        try:
            session = Nvml.open(self.backend)
        except NvmlUnavailable:
            return
        try:
            while not self._stop.is_set():
                for index in self.indices:
                    activity = session.gpm(index, self.window_s, sleep=self._stop.wait)
                    if not self._stop.is_set():
                        self._latest[index] = activity
        finally:
            session.close()


def _info(nvml: Nvml, index: int) -> GpuInfo:
    static = nvml.static(index)
    info = GpuInfo(
        index=index, name=na_to_none(static.name), uuid=na_to_none(static.uuid),
        pci_bus_id=na_to_none(static.pci_bus_id),
        memory_total_bytes=na_to_none(static.memory_total_bytes),
        sm_clock_max_mhz=na_to_none(static.sm_clock_max_mhz),
        mem_clock_max_mhz=na_to_none(static.mem_clock_max_mhz),
        power_limit_default_w=na_to_none(static.power_limit_default_w),
        pcie_gen_max=na_to_none(static.pcie_gen_max),
        pcie_width_max=na_to_none(static.pcie_width_max),
        pcie_gen_gpu_max=na_to_none(static.pcie_gen_gpu_max),
        temperature_slowdown_c=na_to_none(static.temperature_slowdown_c),
        nvlink_links=len(static.nvlink_links), gpm_supported=na_to_none(static.gpm_supported),
    )
    return _with_catalog(info)


def _with_catalog(info: GpuInfo) -> GpuInfo:
    """The catalog's peaks and NVLink rate for the GPU NVML names, where it matches one."""
    from trainrig.catalog import load_catalog
    from trainrig.probe.catalog_match import match_gpu

    memory_gib = info.memory_total_bytes / 2**30 if info.memory_total_bytes else None
    section = load_catalog().gpus
    match = match_gpu(info.name, memory_gib, section)
    if match.catalog_id is None:
        return info
    spec = section.get(match.catalog_id).entry
    peaks = {k: v for k, v in spec.peak_tflops.model_dump().items() if v is not None}
    return GpuInfo(**{**asdict(info), "catalog_id": spec.id, "peak_tflops": peaks,
                      "nvlink_gbs": spec.scale_up_gbs})
