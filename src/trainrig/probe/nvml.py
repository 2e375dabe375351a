"""The NVML API layer: every NVML call goes through `Nvml.call`, which never raises for a metric.

Shared by `probe` (what the GPUs are) and `monitor` (what they do over time). It imports no UI code
and imports `pynvml` (the `nvidia-ml-py` package) lazily, only when the real backend is opened.

A metric the driver cannot give — NVML's NotSupported, NoPermission, FunctionNotFound, GPU lost, or
any other NVML error — comes back as the singleton `NA`, which renders as "N/A", is falsy, and is
never -1 or 0. Why it is missing is kept in each snapshot's `unavailable` mapping.

Backends are injectable: `Nvml.open()` uses the real `pynvml` module; `Nvml.open(FakeNvml(...))`
(see `trainrig.probe.nvml_fake`) replays a recording. A backend is any object with pynvml's
function names (`nvmlInit`, `nvmlDeviceGetName`, …) and an `NVMLError` exception class whose
instances carry the NVML return code in `.value`.

Units follow NVML's documentation (docs.nvidia.com/deploy/nvml-api, "Device Queries"): power in
mW (converted to W here), clocks in MHz, temperatures in °C, PCIe throughput in KB/s over a 20 ms
window (kept raw: `pcie_tx_kbs`), NVLink data counters in KiB (cumulative, kept raw).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

__all__ = [
    "NA",
    "NotAvailable",
    "is_na",
    "na_to_none",
    "NvmlUnavailable",
    "Nvml",
    "open_nvml",
    "GpuStatic",
    "GpuSample",
    "NvLinkStatus",
    "GpmActivity",
    "CLOCK_EVENT_BITS",
    "SLOWDOWN_REASONS",
    "POWER_REASONS",
    "THERMAL_REASONS",
    "decode_clock_event_reasons",
    "topology_label",
]

T = TypeVar("T")


class NotAvailable:
    """The one value for "NVML could not say": renders as N/A, is falsy, compares only to itself."""

    _instance: NotAvailable | None = None

    def __new__(cls) -> NotAvailable:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "N/A"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return "N/A"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "NA"

    def __copy__(self) -> NotAvailable:
        return self

    def __deepcopy__(self, memo: dict) -> NotAvailable:
        return self


NA: Final = NotAvailable()


def is_na(value: object) -> bool:
    """True for the N/A singleton."""
    return value is NA


def na_to_none(value: T | NotAvailable) -> T | None:
    """N/A → None, for JSON and pydantic models; anything else unchanged."""
    return None if value is NA else value  # type: ignore[return-value]


class NvmlUnavailable(Exception):
    """NVML cannot be used at all on this machine (no package, no driver, no library)."""


# NVML return codes → the reason kept for a missing metric (nvml.h, nvmlReturn_t).
_REASONS: Final[dict[int, str]] = {
    1: "NVML not initialized",
    2: "invalid argument",
    3: "not supported",
    4: "no permission",
    6: "not found",
    9: "driver not loaded",
    12: "NVML library not found",
    13: "function not found in this driver",
    15: "GPU is lost",
    16: "GPU requires reset",
    18: "driver/library version mismatch",
    999: "unknown NVML error",
}
NOT_RECORDED = "not in the recording"

# Clock event ("throttle") reason bits, nvmlClocksEventReason* in nvml.h / pynvml; see MODELING.md.
CLOCK_EVENT_BITS: Final[dict[int, str]] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
POWER_REASONS: Final = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})
THERMAL_REASONS: Final = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})
SLOWDOWN_REASONS: Final = frozenset({"hw_slowdown"}) | POWER_REASONS | THERMAL_REASONS


def decode_clock_event_reasons(mask: int | NotAvailable) -> tuple[str, ...] | NotAvailable:
    """0x24 → ('sw_power_cap', 'sw_thermal_slowdown'); unknown bits → 'unknown_0x…'."""
    if mask is NA:
        return NA
    names = [name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_EVENT_BITS)
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"unknown_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return tuple(names)


# nvmlGpuTopologyLevel_t → nvidia-smi topo -m labels.
_TOPOLOGY: Final[dict[int, str]] = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def topology_label(level: int | NotAvailable) -> str:
    """An NVML topology level as `nvidia-smi topo -m` prints it (PIX, PXB, PHB, NODE, SYS)."""
    return "N/A" if level is NA else _TOPOLOGY.get(int(level), f"level{level}")


_ARCHITECTURES: Final[dict[int, str]] = {
    2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere",
    8: "Ada", 9: "Hopper", 10: "Blackwell",
}
# NVML constants used below (nvml.h); kept here so the layer needs pynvml only for the real backend.
CLOCK_GRAPHICS, CLOCK_SM, CLOCK_MEM = 0, 1, 2
TEMP_GPU = 0
TEMP_THRESHOLD_SHUTDOWN, TEMP_THRESHOLD_SLOWDOWN, TEMP_THRESHOLD_GPU_MAX = 0, 1, 3
PCIE_TX, PCIE_RX = 0, 1
ECC_CORRECTED, ECC_UNCORRECTED = 0, 1
ECC_VOLATILE, ECC_AGGREGATE = 0, 1
FI_NVLINK_TX_KIB, FI_NVLINK_RX_KIB = 138, 139
NVLINK_MAX_LINKS = 18  # NVLink 4/5 GPUs expose 18 links (H100/B200 datasheets)
GPM_SM_UTIL, GPM_ANY_TENSOR_UTIL, GPM_DRAM_BW_UTIL = 2, 5, 10  # nvmlGpmMetricId_t
GPM_METRICS_GET_VERSION = 1
P2P_CAPS_NVLINK, P2P_STATUS_OK = 2, 0  # nvmlGpuP2PCapsIndex_t, nvmlGpuP2PStatus_t


@dataclass(frozen=True)
class NvLinkStatus:
    """One NVLink of one GPU."""

    link: int
    active: bool | NotAvailable
    version: int | NotAvailable
    remote_pci_bus_id: str | NotAvailable


@dataclass(frozen=True)
class GpuStatic:
    """What a GPU is; read once."""

    index: int
    name: str | NotAvailable
    uuid: str | NotAvailable
    pci_bus_id: str | NotAvailable
    architecture: str | NotAvailable
    cuda_capability: str | NotAvailable
    memory_total_bytes: int | NotAvailable
    sm_clock_max_mhz: int | NotAvailable
    mem_clock_max_mhz: int | NotAvailable
    power_limit_default_w: float | NotAvailable
    power_limit_max_w: float | NotAvailable
    pcie_gen_max: int | NotAvailable
    """Maximum PCIe generation of this GPU *and system* (a Gen4 card in a Gen3 slot says 3)."""
    pcie_gen_gpu_max: int | NotAvailable
    """Maximum PCIe generation the GPU itself supports."""
    pcie_width_max: int | NotAvailable
    """Maximum link width of this GPU and system."""
    ecc_enabled: bool | NotAvailable
    temperature_slowdown_c: int | NotAvailable
    temperature_shutdown_c: int | NotAvailable
    temperature_max_operating_c: int | NotAvailable
    nvlink_links: tuple[int, ...]
    """Indices of the NVLinks this GPU has (empty when NVLink is not supported)."""
    gpm_supported: bool | NotAvailable
    unavailable: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuSample:
    """What a GPU does right now; cheap enough to read every second."""

    index: int
    timestamp_s: float
    utilization_gpu_pct: int | NotAvailable
    """Percent of the sample period in which a kernel ran (not how busy the SMs were)."""
    utilization_memory_pct: int | NotAvailable
    memory_used_bytes: int | NotAvailable
    memory_total_bytes: int | NotAvailable
    power_w: float | NotAvailable
    power_limit_w: float | NotAvailable
    """The enforced limit (the lower of the user's and the board's)."""
    sm_clock_mhz: int | NotAvailable
    mem_clock_mhz: int | NotAvailable
    sm_clock_max_mhz: int | NotAvailable
    mem_clock_max_mhz: int | NotAvailable
    temperature_c: int | NotAvailable
    performance_state: int | NotAvailable
    clock_event_mask: int | NotAvailable
    clock_event_reasons: tuple[str, ...] | NotAvailable
    pcie_tx_kbs: int | NotAvailable
    pcie_rx_kbs: int | NotAvailable
    pcie_gen_current: int | NotAvailable
    pcie_width_current: int | NotAvailable
    pcie_gen_max: int | NotAvailable
    pcie_width_max: int | NotAvailable
    pcie_replay_count: int | NotAvailable
    ecc_corrected_volatile: int | NotAvailable
    ecc_uncorrected_volatile: int | NotAvailable
    ecc_uncorrected_aggregate: int | NotAvailable
    remapped_rows_pending: bool | NotAvailable
    remapped_rows_failure: bool | NotAvailable
    nvlink_active_links: int | NotAvailable
    nvlink_tx_kib_total: int | NotAvailable
    nvlink_rx_kib_total: int | NotAvailable
    unavailable: dict[str, str] = field(default_factory=dict)

    @property
    def slowdown_reasons(self) -> tuple[str, ...] | NotAvailable:
        """The clock event reasons that cost performance (power, thermal, hardware slowdown)."""
        reasons = self.clock_event_reasons
        return NA if reasons is NA else tuple(r for r in reasons if r in SLOWDOWN_REASONS)


@dataclass(frozen=True)
class GpmActivity:
    """GPM activity over an interval (Hopper and newer), percent 0–100; N/A where unsupported.

    `sm_active_pct` is NVML_GPM_METRIC_SM_UTIL ("percentage of SMs that were busy"),
    `tensor_active_pct` is ANY_TENSOR_UTIL, `dram_active_pct` is DRAM_BW_UTIL (NVML GPM enums).
    """

    index: int
    interval_s: float
    sm_active_pct: float | NotAvailable
    tensor_active_pct: float | NotAvailable
    dram_active_pct: float | NotAvailable
    unavailable: dict[str, str] = field(default_factory=dict)


class Nvml:
    """A session with NVML through one backend. Use `Nvml.open()` or `open_nvml()`."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self._error_type = getattr(backend, "NVMLError", None) or _NeverRaised
        self._handles: dict[int, Any] = {}
        self._static: dict[int, GpuStatic] = {}
        self.last_reason: str | None = None
        self.lost: set[int] = set()

    # -- the one wrapper -------------------------------------------------------------------
    def call(self, function: str, *args: Any) -> Any:
        """Call one NVML function; any NVML error becomes NA (reason in `last_reason`)."""
        self.last_reason = None
        if any(arg is NA for arg in args):
            return self._missing("GPU handle unavailable")
        method = getattr(self.backend, function, None)
        if method is None:
            return self._missing("function not in this NVML binding")
        try:
            return method(*args)
        except self._error_type as error:
            code = getattr(error, "value", None)
            return self._missing(_REASONS.get(code, f"NVML error {code}") if code else str(error))

    def _missing(self, reason: str) -> NotAvailable:
        self.last_reason = reason
        return NA

    def call_first(self, functions: Iterable[str], *args: Any) -> Any:
        """The first of several equivalent functions that the driver has (newer names first)."""
        value: Any = NA
        for function in functions:
            value = self.call(function, *args)
            if value is not NA or self.last_reason not in _FALLBACK_REASONS:
                return value
        return value

    # -- session ---------------------------------------------------------------------------
    @classmethod
    def open(cls, backend: Any | None = None) -> Nvml:
        """Initialise NVML on `backend` (default: the real pynvml); NvmlUnavailable if impossible."""
        session = cls(backend if backend is not None else _real_backend())
        if session.call("nvmlInit") is NA:
            raise NvmlUnavailable(f"NVML could not start: {session.last_reason}")
        return session

    def close(self) -> None:
        self.call("nvmlShutdown")

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def driver_version(self) -> str | NotAvailable:
        return _text(self.call("nvmlSystemGetDriverVersion"))

    def cuda_driver_version(self) -> str | NotAvailable:
        """The CUDA version the driver supports, e.g. `12.4` (NVML gives 12040)."""
        value = self.call("nvmlSystemGetCudaDriverVersion")
        return NA if value is NA else f"{value // 1000}.{value % 1000 // 10}"

    def device_count(self) -> int:
        count = self.call("nvmlDeviceGetCount")
        return 0 if count is NA else int(count)

    def handle(self, index: int) -> Any:
        if index not in self._handles:
            handle = self.call("nvmlDeviceGetHandleByIndex", index)
            if handle is NA:
                self.lost.add(index)
            self._handles[index] = handle
        return self._handles[index]

    # -- snapshots -------------------------------------------------------------------------
    def static(self, index: int) -> GpuStatic:
        """What GPU `index` is (cached)."""
        if index not in self._static:
            self._static[index] = self._read_static(index)
        return self._static[index]

    def _read_static(self, index: int) -> GpuStatic:
        miss: dict[str, str] = {}
        get = _Getter(self, index, miss)
        h = get.handle
        ecc = get("ecc_enabled", "nvmlDeviceGetEccMode")
        gpm = get("gpm_supported", "nvmlGpmQueryDeviceSupport")
        constraints = get("power_limit_max_w", "nvmlDeviceGetPowerManagementLimitConstraints")
        return GpuStatic(
            index=index,
            name=_text(get("name", "nvmlDeviceGetName")),
            uuid=_text(get("uuid", "nvmlDeviceGetUUID")),
            pci_bus_id=_bus_id(get("pci_bus_id", "nvmlDeviceGetPciInfo")),
            architecture=_map(get("architecture", "nvmlDeviceGetArchitecture"), _arch_name),
            cuda_capability=_map(
                get("cuda_capability", "nvmlDeviceGetCudaComputeCapability"),
                lambda v: f"{v[0]}.{v[1]}",
            ),
            memory_total_bytes=_map(get("memory_total_bytes", "nvmlDeviceGetMemoryInfo"),
                                    lambda m: int(m.total)),
            sm_clock_max_mhz=get("sm_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", CLOCK_SM),
            mem_clock_max_mhz=get("mem_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", CLOCK_MEM),
            power_limit_default_w=_map(
                get("power_limit_default_w", "nvmlDeviceGetPowerManagementDefaultLimit"), _watts
            ),
            power_limit_max_w=_map(constraints, lambda c: _watts(c[1])),
            pcie_gen_max=get("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
            pcie_gen_gpu_max=get("pcie_gen_gpu_max", "nvmlDeviceGetGpuMaxPcieLinkGeneration"),
            pcie_width_max=get("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
            ecc_enabled=_map(ecc, lambda e: bool(e[0])),
            temperature_slowdown_c=get("temperature_slowdown_c",
                                       "nvmlDeviceGetTemperatureThreshold",
                                       TEMP_THRESHOLD_SLOWDOWN),
            temperature_shutdown_c=get("temperature_shutdown_c",
                                       "nvmlDeviceGetTemperatureThreshold",
                                       TEMP_THRESHOLD_SHUTDOWN),
            temperature_max_operating_c=get("temperature_max_operating_c",
                                            "nvmlDeviceGetTemperatureThreshold",
                                            TEMP_THRESHOLD_GPU_MAX),
            nvlink_links=self._present_links(h),
            gpm_supported=_map(gpm, lambda s: bool(s.isSupportedDevice)),
            unavailable=miss,
        )

    def _present_links(self, h: Any) -> tuple[int, ...]:
        links = []
        for link in range(NVLINK_MAX_LINKS):
            if self.call("nvmlDeviceGetNvLinkState", h, link) is NA:
                break
            links.append(link)
        return tuple(links)

    def sample(self, index: int) -> GpuSample:
        """What GPU `index` does now."""
        static = self.static(index)
        miss: dict[str, str] = {}
        get = _Getter(self, index, miss)
        h = get.handle
        memory = get("memory_used_bytes", "nvmlDeviceGetMemoryInfo", also=("memory_total_bytes",))
        util = get("utilization_gpu_pct", "nvmlDeviceGetUtilizationRates",
                   also=("utilization_memory_pct",))
        mask = self.call_first(
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), h
        )
        if mask is NA:
            miss["clock_event_mask"] = miss["clock_event_reasons"] = self.last_reason or "unknown"
        remapped = get("remapped_rows_pending", "nvmlDeviceGetRemappedRows",
                       also=("remapped_rows_failure",))
        nvlink_counters = self._nvlink_counters(h, miss)
        return GpuSample(
            index=index,
            timestamp_s=time.time(),
            utilization_gpu_pct=_map(util, lambda u: int(u.gpu)),
            utilization_memory_pct=_map(util, lambda u: int(u.memory)),
            memory_used_bytes=_map(memory, lambda m: int(m.used)),
            memory_total_bytes=_map(memory, lambda m: int(m.total)),
            power_w=_map(get("power_w", "nvmlDeviceGetPowerUsage"), _watts),
            power_limit_w=_map(get("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit"), _watts),
            sm_clock_mhz=get("sm_clock_mhz", "nvmlDeviceGetClockInfo", CLOCK_SM),
            mem_clock_mhz=get("mem_clock_mhz", "nvmlDeviceGetClockInfo", CLOCK_MEM),
            sm_clock_max_mhz=static.sm_clock_max_mhz,
            mem_clock_max_mhz=static.mem_clock_max_mhz,
            temperature_c=get("temperature_c", "nvmlDeviceGetTemperature", TEMP_GPU),
            performance_state=get("performance_state", "nvmlDeviceGetPerformanceState"),
            clock_event_mask=mask,
            clock_event_reasons=decode_clock_event_reasons(mask),
            pcie_tx_kbs=get("pcie_tx_kbs", "nvmlDeviceGetPcieThroughput", PCIE_TX),
            pcie_rx_kbs=get("pcie_rx_kbs", "nvmlDeviceGetPcieThroughput", PCIE_RX),
            pcie_gen_current=get("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration"),
            pcie_width_current=get("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth"),
            pcie_gen_max=static.pcie_gen_max,
            pcie_width_max=static.pcie_width_max,
            pcie_replay_count=get("pcie_replay_count", "nvmlDeviceGetPcieReplayCounter"),
            ecc_corrected_volatile=get("ecc_corrected_volatile", "nvmlDeviceGetTotalEccErrors",
                                       ECC_CORRECTED, ECC_VOLATILE),
            ecc_uncorrected_volatile=get("ecc_uncorrected_volatile",
                                         "nvmlDeviceGetTotalEccErrors",
                                         ECC_UNCORRECTED, ECC_VOLATILE),
            ecc_uncorrected_aggregate=get("ecc_uncorrected_aggregate",
                                          "nvmlDeviceGetTotalEccErrors",
                                          ECC_UNCORRECTED, ECC_AGGREGATE),
            remapped_rows_pending=_map(remapped, lambda r: bool(r[2])),
            remapped_rows_failure=_map(remapped, lambda r: bool(r[3])),
            nvlink_active_links=self._active_links(h, static.nvlink_links, miss),
            nvlink_tx_kib_total=nvlink_counters[0],
            nvlink_rx_kib_total=nvlink_counters[1],
            unavailable=miss,
        )

    def _active_links(self, h: Any, links: tuple[int, ...], miss: dict[str, str]) -> Any:
        if not links:
            miss["nvlink_active_links"] = "no NVLink on this GPU"
            return NA
        states = [self.call("nvmlDeviceGetNvLinkState", h, link) for link in links]
        return sum(1 for s in states if s is not NA and s)

    def _nvlink_counters(self, h: Any, miss: dict[str, str]) -> tuple[Any, Any]:
        values = self.call("nvmlDeviceGetFieldValues", h, [FI_NVLINK_TX_KIB, FI_NVLINK_RX_KIB])
        if values is NA:
            reason = self.last_reason or "unknown"
            miss["nvlink_tx_kib_total"] = miss["nvlink_rx_kib_total"] = reason
            return NA, NA
        out = []
        for name, value in zip(("nvlink_tx_kib_total", "nvlink_rx_kib_total"), values, strict=False):
            if int(value.nvmlReturn) != 0:
                miss[name] = _REASONS.get(int(value.nvmlReturn), "unknown")
                out.append(NA)
            else:
                out.append(_field_value(value))
        return (out + [NA, NA])[0], (out + [NA, NA])[1]

    def nvlinks(self, index: int) -> list[NvLinkStatus]:
        """State, version and remote end of every NVLink of GPU `index`."""
        h = self.handle(index)
        return [
            NvLinkStatus(
                link=link,
                active=_map(self.call("nvmlDeviceGetNvLinkState", h, link), bool),
                version=self.call("nvmlDeviceGetNvLinkVersion", h, link),
                remote_pci_bus_id=_bus_id(self.call("nvmlDeviceGetNvLinkRemotePciInfo", h, link)),
            )
            for link in self.static(index).nvlink_links
        ]

    def topology(self) -> list[list[str]]:
        """`nvidia-smi topo -m`-style matrix: X, NV<k> (k NVLinks between the pair), PIX … SYS."""
        n = self.device_count()
        bus_ids = [self.static(i).pci_bus_id for i in range(n)]
        links = {i: self.nvlinks(i) for i in range(n)}
        matrix = []
        for i in range(n):
            row = []
            for j in range(n):
                row.append("X" if i == j else self._pair_label(i, j, links[i], bus_ids[j]))
            matrix.append(row)
        return matrix

    def _pair_label(self, i: int, j: int, links_i: list[NvLinkStatus], bus_j: Any) -> str:
        shared = sum(
            1 for s in links_i if s.active is True and _same_bus(s.remote_pci_bus_id, bus_j)
        )
        if shared:
            return f"NV{shared}"
        hi, hj = self.handle(i), self.handle(j)
        if self.call("nvmlDeviceGetP2PStatus", hi, hj, P2P_CAPS_NVLINK) == P2P_STATUS_OK:
            # Through NVSwitch: the links end at switches, so count the GPU's active links.
            return f"NV{sum(1 for s in links_i if s.active is True)}"
        return topology_label(self.call("nvmlDeviceGetTopologyCommonAncestor", hi, hj))

    def gpm(self, index: int, interval_s: float = 0.1,
            sleep: Callable[[float], None] = time.sleep) -> GpmActivity:
        """SM / tensor / DRAM activity over `interval_s` via NVML GPM; N/A before Hopper."""
        miss: dict[str, str] = {}
        names = ("sm_active_pct", "tensor_active_pct", "dram_active_pct")
        supported = self.static(index).gpm_supported
        if supported is not True:
            reason = "GPM not supported on this GPU" if supported is False else "GPM unavailable"
            return GpmActivity(index, interval_s, NA, NA, NA, dict.fromkeys(names, reason))
        values = self._gpm_metrics(index, interval_s, sleep, miss)
        return GpmActivity(index, interval_s, *(values.get(n, NA) for n in names), unavailable=miss)

    def _gpm_metrics(self, index: int, interval_s: float, sleep: Callable[[float], None],
                     miss: dict[str, str]) -> dict[str, Any]:
        ids = {"sm_active_pct": GPM_SM_UTIL, "tensor_active_pct": GPM_ANY_TENSOR_UTIL,
               "dram_active_pct": GPM_DRAM_BW_UTIL}
        h = self.handle(index)
        first, second = self.call("nvmlGpmSampleAlloc"), self.call("nvmlGpmSampleAlloc")
        try:
            if first is NA or second is NA or self.call("nvmlGpmSampleGet", h, first) is NA:
                return _all_missing(ids, miss, self.last_reason)
            sleep(interval_s)
            if self.call("nvmlGpmSampleGet", h, second) is NA:
                return _all_missing(ids, miss, self.last_reason)
            request = _gpm_request(self.backend, first, second, list(ids.values()))
            result = self.call("nvmlGpmMetricsGet", request)
            if result is NA:
                return _all_missing(ids, miss, self.last_reason)
            return _gpm_values(result, ids, miss)
        finally:
            for sample in (first, second):
                if sample is not NA:
                    self.call("nvmlGpmSampleFree", sample)


def open_nvml(backend: Any | None = None) -> Nvml:
    """`Nvml.open(backend)`; usable as a context manager (`with open_nvml() as nvml:`)."""
    return Nvml.open(backend)


# -- helpers -------------------------------------------------------------------------------
_FALLBACK_REASONS = frozenset(
    {"function not in this NVML binding", "function not found in this driver"}
)


class _NeverRaised(Exception):
    """Stands in for a backend without an NVMLError class."""


class _Getter:
    """Calls `nvml.call(function, handle, *args)` and files a missing value's reason under `name`
    (and under `also`, the other fields read from the same call)."""

    def __init__(self, nvml: Nvml, index: int, missing: dict[str, str]) -> None:
        self.nvml, self.index, self.missing = nvml, index, missing
        self.handle = nvml.handle(index)

    def __call__(self, name: str, function: str, *args: Any, also: tuple[str, ...] = ()) -> Any:
        if self.handle is NA:
            value, reason = NA, "GPU handle unavailable"
        else:
            value = self.nvml.call(function, self.handle, *args)
            reason = self.nvml.last_reason or "unknown"
        if value is NA:
            for key in (name, *also):
                self.missing[key] = reason
            if reason == _REASONS[15]:
                self.nvml.lost.add(self.index)
        return value


def _real_backend() -> Any:
    try:
        import pynvml
    except ImportError as error:
        raise NvmlUnavailable("the nvidia-ml-py package is not installed") from error
    return pynvml


def _map(value: Any, convert: Callable[[Any], T]) -> T | NotAvailable:
    return NA if value is NA else convert(value)


def _text(value: Any) -> str | NotAvailable:
    if value is NA:
        return NA
    return value.decode() if isinstance(value, bytes) else str(value)


def _watts(milliwatts: Any) -> float:
    return float(milliwatts) / 1000.0


def _arch_name(code: Any) -> str:
    return _ARCHITECTURES.get(int(code), f"arch{int(code)}")


def _bus_id(pci: Any) -> str | NotAvailable:
    if pci is NA:
        return NA
    bus = getattr(pci, "busId", pci)
    return _text(bus)


def _same_bus(a: Any, b: Any) -> bool:
    """PCI bus ids compared without case or the domain's zero padding."""
    if a is NA or b is NA:
        return False
    return _bus_key(str(a)) == _bus_key(str(b))


def _bus_key(bus_id: str) -> str:
    domain, _, rest = bus_id.lower().partition(":")
    return f"{int(domain, 16) if domain else 0}:{rest}"


def _field_value(value: Any) -> int | float:
    # nvmlValueType_t: 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 sint, 6 ushort
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
              6: "usVal"}.get(int(value.valueType), "ullVal")
    return getattr(value.value, member)


def _gpm_request(backend: Any, first: Any, second: Any, metric_ids: list[int]) -> Any:
    """The ctypes request struct, from the backend (pynvml, or a fake that borrows pynvml's)."""
    request = backend.c_nvmlGpmMetricsGet_t()
    request.version = GPM_METRICS_GET_VERSION
    request.numMetrics = len(metric_ids)
    request.sample1, request.sample2 = first, second
    for slot, metric_id in enumerate(metric_ids):
        request.metrics[slot].metricId = metric_id
    return request


def _gpm_values(result: Any, ids: dict[str, int], miss: dict[str, str]) -> dict[str, Any]:
    by_id = {int(result.metrics[i].metricId): result.metrics[i] for i in range(result.numMetrics)}
    values: dict[str, Any] = {}
    for name, metric_id in ids.items():
        metric = by_id.get(metric_id)
        if metric is None or int(metric.nvmlReturn) != 0:
            code = None if metric is None else int(metric.nvmlReturn)
            miss[name] = _REASONS.get(code, "metric not returned") if code else "metric not returned"
            values[name] = NA
        else:
            values[name] = float(metric.value)
    return values


def _all_missing(ids: dict[str, int], miss: dict[str, str], reason: str | None) -> dict[str, Any]:
    for name in ids:
        miss[name] = reason or "unknown"
    return dict.fromkeys(ids, NA)
