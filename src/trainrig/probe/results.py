"""What a probe found: typed results, kept apart from rendering.

One `ProbeResult` feeds the rich tables, `--json` and `--html`. Missing figures are `None` (JSON
null, shown as N/A); every benchmark says how it measured in `method`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ProbeModel", "CpuInfo", "MemoryInfo", "DiskInfo", "NicInfo", "SystemInfo", "LoadObservation",
    "GpuInfo", "NvmlInfo", "TorchInfo", "GemmPoint", "GemmPrecision", "GemmResult",
    "DeviceCopyResult", "PcieResult", "P2PPair", "P2PResult", "CollectivePoint", "CollectiveOp",
    "CollectivesResult", "CpuLoadingResult", "HostMemoryResult", "StorageResult", "Benchmarks",
    "Verdict", "Check", "SectionStatus", "ProbeResult", "SECTIONS",
]

SECTIONS = ("gemm", "memory", "pcie", "p2p", "collectives", "cpu", "storage", "hostmem")
"""Benchmark sections `--only` can name, in the order they run."""

Verdict = Literal["OK", "LOW", "FAIL", "INFO"]


class ProbeModel(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


# -- detection ---------------------------------------------------------------------------------
class CpuInfo(ProbeModel):
    model: str | None = None
    vendor: str | None = None
    sockets: int | None = None
    cores_physical: int | None = None
    threads_logical: int | None = None
    usable_cpus: int | None = None
    """CPUs this process may run on (affinity mask)."""
    cgroup_quota_cores: float | None = None
    """A container's CPU quota in cores, where one is set."""
    numa_nodes: int | None = None
    freq_max_mhz: float | None = None


class MemoryInfo(ProbeModel):
    total_bytes: int
    available_bytes: int
    cgroup_limit_bytes: int | None = None

    @property
    def total_gib(self) -> float:
        return self.total_bytes / 2**30


class DiskInfo(ProbeModel):
    device: str
    mountpoint: str
    fstype: str
    kind: str
    """nvme, ssd, hdd, virtual, network, memory or unknown."""
    rotational: bool | None = None
    model: str | None = None
    total_bytes: int | None = None
    free_bytes: int | None = None


class NicInfo(ProbeModel):
    name: str
    kind: str
    """ethernet, infiniband or virtual."""
    is_up: bool | None = None
    speed_mbps: int | None = None
    max_speed_mbps: int | None = None
    """The fastest mode the port supports (ethtool), where known."""
    mtu: int | None = None
    numa_node: int | None = None
    rate_text: str | None = None


class SystemInfo(ProbeModel):
    hostname: str
    os: str
    python: str
    cpu: CpuInfo
    memory: MemoryInfo
    disks: list[DiskInfo] = Field(default_factory=list)
    nics: list[NicInfo] = Field(default_factory=list)


class LoadObservation(ProbeModel):
    """What NVML showed while the GPU benchmarks ran on this GPU."""

    samples: int
    utilization_gpu_pct_max: int | None = None
    sm_clock_mhz_min: int | None = None
    sm_clock_mhz_median: float | None = None
    power_w_max: float | None = None
    temperature_c_max: int | None = None
    pcie_gen_max_seen: int | None = None
    pcie_width_max_seen: int | None = None
    slowdown_reasons: list[str] = Field(default_factory=list)


class GpuInfo(ProbeModel):
    index: int
    name: str | None = None
    catalog_id: str | None = None
    catalog_note: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    numa_node: int | None = None
    architecture: str | None = None
    cuda_capability: str | None = None
    memory_total_gib: float | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    sm_clock_mhz: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    power_limit_default_w: float | None = None
    temperature_c: int | None = None
    temperature_slowdown_c: int | None = None
    utilization_gpu_pct: int | None = None
    performance_state: int | None = None
    pcie_gen_current: int | None = None
    pcie_width_current: int | None = None
    pcie_gen_max: int | None = None
    """Maximum of GPU and system together (a Gen4 card in a Gen3 slot says 3)."""
    pcie_width_max: int | None = None
    pcie_gen_gpu_max: int | None = None
    pcie_replay_count: int | None = None
    nvlink_links: int = 0
    nvlink_active_links: int | None = None
    ecc_enabled: bool | None = None
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_volatile: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    clock_event_reasons: list[str] | None = None
    gpm_supported: bool | None = None
    unavailable: dict[str, str] = Field(default_factory=dict)
    """Metrics NVML could not give, with the reason (not supported, no permission …)."""
    under_load: LoadObservation | None = None


class NvmlInfo(ProbeModel):
    available: bool
    source: str
    """`pynvml`, or `fake:<recording>` when replaying."""
    reason: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    device_count: int = 0
    topology: list[list[str]] = Field(default_factory=list)


class TorchInfo(ProbeModel):
    available: bool
    version: str | None = None
    cuda_available: bool = False
    cuda_version: str | None = None
    device_count: int = 0
    reason: str | None = None


# -- benchmarks --------------------------------------------------------------------------------
class GemmPoint(ProbeModel):
    m: int
    n: int
    k: int
    time_s: float
    tflops: float
    fraction_of_best: float | None = None
    fraction_of_peak: float | None = None


class GemmPrecision(ProbeModel):
    precision: str
    best_tflops: float | None = None
    best_shape: str | None = None
    peak_tflops: float | None = None
    points: list[GemmPoint] = Field(default_factory=list)
    skipped: str | None = None


class GemmResult(ProbeModel):
    device: str
    gpu_index: int | None = None
    precisions: list[GemmPrecision] = Field(default_factory=list)
    method: str

    def best(self, precision: str) -> float | None:
        return next((p.best_tflops for p in self.precisions if p.precision == precision), None)


class DeviceCopyResult(ProbeModel):
    device: str
    gpu_index: int | None = None
    copy_gbs: float
    buffer_bytes: int
    method: str


class PcieResult(ProbeModel):
    gpu_index: int
    h2d_pinned_gbs: float | None = None
    d2h_pinned_gbs: float | None = None
    h2d_pageable_gbs: float | None = None
    d2h_pageable_gbs: float | None = None
    bidirectional_pinned_gbs: float | None = None
    """Both directions at once, total of the two."""
    size_bytes: int
    link_gen_during: int | None = None
    link_width_during: int | None = None
    method: str


class P2PPair(ProbeModel):
    src: int
    dst: int
    peer_access: bool
    gbs: float | None = None


class P2PResult(ProbeModel):
    pairs: list[P2PPair] = Field(default_factory=list)
    size_bytes: int
    method: str


class CollectivePoint(ProbeModel):
    size_bytes: int
    time_s: float
    algbw_gbs: float
    busbw_gbs: float


class CollectiveOp(ProbeModel):
    op: str
    points: list[CollectivePoint] = Field(default_factory=list)
    peak_busbw_gbs: float | None = None
    error: str | None = None


class CollectivesResult(ProbeModel):
    backend: str
    world_size: int
    nnodes: int
    local_world_size: int
    device: str
    ops: list[CollectiveOp] = Field(default_factory=list)
    method: str
    command: str

    def peak(self, op: str) -> float | None:
        return next((o.peak_busbw_gbs for o in self.ops if o.op == op), None)


class CpuLoadingResult(ProbeModel):
    tokenize_tokens_per_s_per_core: float
    tokenize_tokens_per_s_all_cores: float
    collate_tokens_per_s_per_core: float
    collate_tokens_per_s_all_cores: float
    processes: int
    tokenizer: str
    method: str


class HostMemoryResult(ProbeModel):
    copy_gbs_one_core: float
    copy_gbs_all_cores: float
    processes: int
    array_bytes: int
    method: str


class StorageResult(ProbeModel):
    path: str
    filesystem: str | None = None
    device_kind: str | None = None
    files: int
    file_bytes: int
    read_gbs: float | None = None
    write_gbs: float | None = None
    read_method: str
    write_method: str


class Benchmarks(ProbeModel):
    gemm: list[GemmResult] = Field(default_factory=list)
    memory: list[DeviceCopyResult] = Field(default_factory=list)
    pcie: list[PcieResult] = Field(default_factory=list)
    p2p: P2PResult | None = None
    collectives: CollectivesResult | None = None
    cpu: CpuLoadingResult | None = None
    hostmem: HostMemoryResult | None = None
    storage: StorageResult | None = None


# -- verdicts and the whole result ---------------------------------------------------------------
class Check(ProbeModel):
    """One figure beside its spec and what such hardware normally achieves, with a verdict."""

    component: str
    """`GPU0`, `GPU0→GPU1`, `node`, `CPU`, `storage`, `eth0` …"""
    name: str
    unit: str | None = None
    measured: float | None = None
    spec: float | None = None
    """The datasheet figure."""
    expected: float | None = None
    """What such hardware normally achieves (a fraction of the spec, from measurements)."""
    ratio: float | None = None
    """measured / expected."""
    verdict: Verdict
    cause: str | None = None
    action: str | None = None
    source: str | None = None


class SectionStatus(ProbeModel):
    name: str
    status: Literal["ran", "skipped", "partial", "failed"]
    reason: str | None = None
    duration_s: float = 0.0


class ProbeResult(ProbeModel):
    trainrig_version: str
    measured_at: str
    quick: bool
    time_limit_s: float
    duration_s: float = 0.0
    gpu_found: bool = False
    system: SystemInfo
    nvml: NvmlInfo
    torch: TorchInfo
    gpus: list[GpuInfo] = Field(default_factory=list)
    benchmarks: Benchmarks = Field(default_factory=Benchmarks)
    checks: list[Check] = Field(default_factory=list)
    sections: list[SectionStatus] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
