"""Health verdicts: each measured figure beside its spec and what such hardware normally achieves.

Pure functions from (measured, spec/expected) to a `Check` with verdict OK / LOW / FAIL (or INFO
where nothing published says what to expect), a one-line likely cause and an action. `evaluate`
assembles them for a whole `ProbeResult`. No I/O, no clock.

"Expected" is what such hardware normally reaches, not the datasheet peak; the fractions below are
public measurements collected in MODELING.md ("What hardware really reaches"):
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from trainrig.probe.results import (
    Check,
    CollectivesResult,
    CpuInfo,
    GpuInfo,
    MemoryInfo,
    NicInfo,
    P2PPair,
    PcieResult,
    ProbeResult,
    StorageResult,
)
from trainrig.specs import GPU, Link, Storage

__all__ = [
    "OK_RATIO", "FAIL_RATIO", "MAMF_BF16_DEFAULT", "MAMF_FP8_DEFAULT", "POWER_BOUND_GEMM_FRACTION",
    "HBM_COPY_FRACTION",
    "HBM_COPY_FRACTION_AMD", "PCIE_PINNED_X16_GBS", "NVLINK_RING_EFFICIENCY",
    "INTER_NODE_NIC_EFFICIENCY", "LOADER_WORKERS_PER_GPU", "SYSTEM_CORES",
    "THERMAL_MARGIN_C", "POWER_CAP_RATIO", "STORAGE_LOW_RATIO", "Specs", "verdict_for",
    "pcie_theoretical_gbs", "pcie_expected_gbs", "check_gemm", "check_memory_bandwidth",
    "check_pcie", "check_pcie_link", "check_clocks", "check_power_limit", "check_temperature",
    "check_ecc", "check_nvlink", "check_p2p", "check_collective", "check_cpu_cores",
    "check_host_ram", "check_storage", "check_nic", "evaluate", "VERDICT_ORDER",
]

# -- thresholds ------------------------------------------------------------------------------------
OK_RATIO = 0.90
"""measured ≥ 90% of what such hardware normally reaches → OK (run-to-run noise and a little
headroom); below → LOW."""
FAIL_RATIO = 0.60
"""measured < 60% of normal → FAIL: a fault (wrong link, cap, throttling), not noise."""

MAMF_BF16_DEFAULT = 0.80
"""Best-shape bf16 GEMM ≈ 80% of the dense peak when the catalog has no measured figure: H100/H200
SXM 80.3%, A100 SXM 86.9%, A100 PCIe 81.1%, B200 77.6% (stas00/ml-engineering
compute/accelerator/README.md, MAMF table; MODELING.md)."""
MAMF_FP8_DEFAULT = 0.71
"""Best-shape fp8 GEMM: H100 70.9%, H200 73.4%, B200 76.3% of the dense fp8 peak (same source)."""
POWER_BOUND_GEMM_FRACTION = 0.864
"""Back-to-back GEMMs at the board's default power limit sustain this share of the MAMF rate (which
is measured in short runs): an H200 at its 700 W default, bf16 16384×28672×8192, 686.8 TFLOP/s
against 0.803 × 989.4 = 794.5, the SM clock held at 1485 of 1980 MHz by the limit (probe sweep,
docs/measurements.md, 2026-12-04). Inside a training step, whose memory-bound kernels let the clock
recover, the same GPU ran its GEMMs at the MAMF rate. Measured on one GPU type: a lead elsewhere."""
HBM_COPY_FRACTION = 0.85
"""Device copy reaches 85–92% of the HBM datasheet bandwidth; the low end is the bar
(RRZE-HPC/gpu-benches gpu-stream results; MODELING.md)."""
HBM_COPY_FRACTION_AMD = 0.75
"""MI300X-class copy reaches 75–80% of spec (same source)."""
PCIE_PINNED_X16_GBS = {3: 12.0, 4: 25.0, 5: 55.0}
"""Pinned x16 copies, one direction: Gen3 ≈ 12, Gen4 ≈ 25, Gen5 ≈ 55 GB/s (78–88% of the link;
RRZE cuda-memcpy, NVIDIA/nvbandwidth#42 and #15; MODELING.md). Used when the catalog has no link."""
PCIE_EFFICIENCY_DEFAULT = 0.80
NVLINK_RING_EFFICIENCY = 0.78
"""Ring collectives reach 78–88% of NVLink's one-direction rate (NVIDIA/nccl-tests#212;
MODELING.md); the low end is the bar when the catalog link has no efficiency."""
INTER_NODE_NIC_EFFICIENCY = 0.73
"""~73% of a NIC's line rate in busbw across nodes (stas00/ml-engineering network/README)."""
LOADER_WORKERS_PER_GPU = 2
SYSTEM_CORES = 4
"""CPU cores per node: GPUs × (loader workers + 1) + a few (ml-engineering compute/cpu)."""
THERMAL_MARGIN_C = 3
"""Within 3 °C of the slowdown threshold counts as running hot (heuristic)."""
POWER_CAP_RATIO = 0.95
"""An enforced power limit below 95% of the default is a deliberate cap."""
STORAGE_LOW_RATIO = 0.5
"""Storage below half its class's catalog rate is LOW (heuristic: no public "typical" figure)."""

VERDICT_ORDER = {"FAIL": 0, "LOW": 1, "OK": 2, "INFO": 3}
_PCIE_GT_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
_PCIE_ENCODING = {1: 0.8, 2: 0.8, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


@dataclass(frozen=True)
class Specs:
    """Catalog lookups the verdicts need: GPU spec per GPU index, links and storage by id."""

    gpus: dict[int, GPU] = field(default_factory=dict)
    link: Callable[[str], Link | None] = lambda _: None
    storage: Callable[[str], Storage | None] = lambda _: None


def verdict_for(measured: float, expected: float) -> str:
    ratio = measured / expected
    return "OK" if ratio >= OK_RATIO else "LOW" if ratio >= FAIL_RATIO else "FAIL"


def _check(component: str, name: str, unit: str, measured: float | None, expected: float | None,
           spec: float | None = None, *, cause: str | None = None, action: str | None = None,
           source: str | None = None) -> Check:
    if measured is None or expected is None or expected <= 0:
        return Check(component=component, name=name, unit=unit, measured=measured, spec=spec,
                     expected=expected, verdict="INFO", cause=cause, source=source)
    verdict = verdict_for(measured, expected)
    return Check(
        component=component, name=name, unit=unit, measured=measured, spec=spec,
        expected=expected, ratio=measured / expected, verdict=verdict,
        cause=None if verdict == "OK" else cause, action=None if verdict == "OK" else action,
        source=source,
    )


# -- PCIe arithmetic ----------------------------------------------------------------------------------
def pcie_theoretical_gbs(gen: int, width: int) -> float:
    """One direction after line encoding: GT/s × lanes × encoding / 8 (PCI-SIG base specs)."""
    return _PCIE_GT_S[gen] * width * _PCIE_ENCODING[gen] / 8


def pcie_expected_gbs(gen: int, width: int, link: Callable[[str], Link | None]) -> float:
    """What pinned copies normally reach on a Gen`gen` x`width` link: the catalog link's rate ×
    efficiency, else MODELING.md's x16 figures scaled by lanes, else 80% of theoretical."""
    entry = link(f"pcie{gen}-x{width}")
    if entry is not None:
        return entry.bandwidth_gbs * entry.efficiency
    if gen in PCIE_PINNED_X16_GBS:
        return PCIE_PINNED_X16_GBS[gen] * width / 16
    return pcie_theoretical_gbs(gen, width) * PCIE_EFFICIENCY_DEFAULT


def _capable_link(gpu: GpuInfo, spec: GPU | None) -> tuple[int | None, int | None]:
    """The link the GPU is built for: its own maximum generation and its lane count."""
    gen = gpu.pcie_gen_gpu_max or (spec.pcie_gen if spec else None) or gpu.pcie_gen_max
    width = (spec.pcie_lanes if spec else None) or gpu.pcie_width_max
    return gen, width


def _busy(gpu: GpuInfo) -> bool:
    """Was the snapshot (or the watched run) taken under load?"""
    if gpu.under_load is not None and (gpu.under_load.utilization_gpu_pct_max or 0) >= 50:
        return True
    return (gpu.utilization_gpu_pct or 0) >= 50 and gpu.performance_state in (0, None)


def _link_now(gpu: GpuInfo, pcie: PcieResult | None) -> tuple[int | None, int | None]:
    if pcie is not None and pcie.link_gen_during:
        return pcie.link_gen_during, pcie.link_width_during
    if gpu.under_load is not None and gpu.under_load.pcie_gen_max_seen:
        return gpu.under_load.pcie_gen_max_seen, gpu.under_load.pcie_width_max_seen
    return gpu.pcie_gen_current, gpu.pcie_width_current


# -- GPU checks ---------------------------------------------------------------------------------------
def check_gemm(gpu: GpuInfo, precision: str, measured_tflops: float | None,
               spec: GPU | None) -> Check:
    component, name = f"GPU{gpu.index}", f"{precision} GEMM (best shape)"
    peak = spec.peak(precision) if spec else None  # type: ignore[arg-type]
    if precision in ("bf16", "fp16"):
        fraction = (spec.matmul_efficiency if spec else None) or MAMF_BF16_DEFAULT
        source = "MAMF best-shape fraction (ml-engineering accelerator README)"
    elif precision == "fp8":
        fraction, source = MAMF_FP8_DEFAULT, "MAMF fp8 fraction (ml-engineering accelerator README)"
    else:
        fraction, source = None, "no public best-shape figure for this precision: shown, not judged"
    if fraction and _power_bound_at_default_limit(gpu):
        fraction *= POWER_BOUND_GEMM_FRACTION
        source += f"; × {POWER_BOUND_GEMM_FRACTION} sustained at the default power limit (H200 measurement)"
    expected = peak * fraction if peak and fraction else None
    return _check(component, name, "TFLOP/s", measured_tflops, expected, peak,
                  cause=_slow_compute_cause(gpu), action=_slow_compute_action(gpu), source=source)


def _power_bound_at_default_limit(gpu: GpuInfo) -> bool:
    """The board's own limit, not a lowered one, held the clock under load, and nothing else did."""
    reasons = _slowdown_reasons(gpu)
    others = {"hw_thermal_slowdown", "sw_thermal_slowdown", "hw_slowdown", "hw_power_brake_slowdown"}
    return "sw_power_cap" in reasons and not reasons & others and not _power_capped(gpu)


def _slowdown_reasons(gpu: GpuInfo) -> set[str]:
    """Clock slowdown reasons seen under load or reported at the sample."""
    return set(gpu.under_load.slowdown_reasons if gpu.under_load else []) | set(gpu.clock_event_reasons or [])


def _slow_compute_cause(gpu: GpuInfo) -> str:
    reasons = _slowdown_reasons(gpu)
    clock = gpu.under_load.sm_clock_mhz_median if gpu.under_load else None
    clock_text = f" (SM clock {clock:.0f} of {gpu.sm_clock_max_mhz} MHz)" if clock and \
        gpu.sm_clock_max_mhz else ""
    if reasons & {"hw_thermal_slowdown", "sw_thermal_slowdown"}:
        return f"clocks held back by heat{clock_text}"
    if reasons & {"hw_slowdown", "hw_power_brake_slowdown"}:
        return f"hardware slowdown (power brake or external signal){clock_text}"
    if _power_capped(gpu):
        return f"power capped at {gpu.power_limit_w:.0f} of {gpu.power_limit_default_w:.0f} W" \
               f"{clock_text}"
    if "sw_power_cap" in reasons:
        return f"clocks held at the power limit{clock_text}"
    return "no throttling seen: another process on the GPU, or an old driver/CUDA library"


def _slow_compute_action(gpu: GpuInfo) -> str:
    cause = _slow_compute_cause(gpu)
    if "heat" in cause:
        return "check airflow, fans and inlet temperature; nvidia-smi -q -d PERFORMANCE,TEMPERATURE"
    if "capped" in cause:
        return f"raise the limit: nvidia-smi -pl {gpu.power_limit_default_w:.0f} (root) or ask the host"
    if "hardware slowdown" in cause:
        return "check power supplies and the board's power brake signal with the vendor"
    return "check nvidia-smi for other processes; update the driver and torch/cuBLAS"


def _power_capped(gpu: GpuInfo) -> bool:
    return bool(gpu.power_limit_w and gpu.power_limit_default_w and
                gpu.power_limit_w < POWER_CAP_RATIO * gpu.power_limit_default_w)


def check_memory_bandwidth(gpu: GpuInfo, measured_gbs: float | None, spec: GPU | None) -> Check:
    peak = spec.memory_bandwidth_gbs if spec else None
    fraction = HBM_COPY_FRACTION_AMD if spec and spec.vendor == "amd" else HBM_COPY_FRACTION
    return _check(
        f"GPU{gpu.index}", "memory copy (read+write)", "GB/s", measured_gbs,
        peak * fraction if peak else None, peak,
        cause=_slow_compute_cause(gpu) if _throttled(gpu) else "memory clock below its maximum, "
        "or ECC/row-remapping trouble",
        action="nvidia-smi -q -d CLOCK,ECC; reset the GPU if row remapping is pending",
        source="RRZE-HPC/gpu-benches gpu-stream: copy reaches 85–92% of spec",
    )


def _throttled(gpu: GpuInfo) -> bool:
    reasons = set(gpu.under_load.slowdown_reasons if gpu.under_load else [])
    return bool(reasons - {"sw_power_cap"}) or _power_capped(gpu)


def check_pcie(gpu: GpuInfo, direction: str, measured_gbs: float | None, spec: GPU | None,
               pcie: PcieResult | None, link: Callable[[str], Link | None]) -> Check:
    """Pinned copy rate against what the GPU's own link (gen × lanes) normally delivers."""
    gen, width = _capable_link(gpu, spec)
    expected = pcie_expected_gbs(gen, width, link) if gen and width else None
    theoretical = pcie_theoretical_gbs(gen, width) if gen and width else None
    now_gen, now_width = _link_now(gpu, pcie)
    degraded = bool(now_gen and gen and (now_gen < gen or (now_width or 99) < (width or 0)))
    if degraded and measured_gbs is not None and expected:
        cause = (f"PCIe link trained at Gen{now_gen} x{now_width}: {measured_gbs:.1f} GB/s "
                 f"measured, ~{expected:.0f} expected for Gen{gen} x{width}")
        action = _link_action(gpu, gen)
    else:
        cause = (f"link at Gen{now_gen} x{now_width} but copies slow: the process may run on "
                 f"the far CPU socket (GPU on NUMA node {gpu.numa_node}), or IOMMU/ACS settings")
        action = (f"bind to the GPU's node (numactl --cpunodebind={gpu.numa_node} --membind="
                  f"{gpu.numa_node}); check IOMMU passthrough and ACS in the BIOS")
    return _check(f"GPU{gpu.index}", f"PCIe {direction} pinned", "GB/s", measured_gbs, expected,
                  theoretical, cause=cause, action=action,
                  source="pinned x16 ≈ 12/25/55 GB/s Gen3/4/5 (nvbandwidth#42, RRZE cuda-memcpy)")


def _link_action(gpu: GpuInfo, gen: int) -> str:
    if gpu.pcie_gen_max is not None and gpu.pcie_gen_max < gen:
        return (f"the slot or platform allows only Gen{gpu.pcie_gen_max}: move the GPU to a "
                f"Gen{gen} x16 slot, or set the slot to Gen{gen} in the BIOS")
    return "check the slot, riser and cable (reseat the card) and the BIOS PCIe speed setting"


def check_pcie_link(gpu: GpuInfo, spec: GPU | None, pcie: PcieResult | None) -> Check | None:
    """The link's generation and width from NVML, judged without a bandwidth measurement."""
    gen, width = _capable_link(gpu, spec)
    now_gen, now_width = _link_now(gpu, pcie)
    if not (gen and width and now_gen and now_width):
        return None
    measured_under_load = _busy(gpu) or (pcie is not None and pcie.link_gen_during is not None)
    text = f"Gen{now_gen} x{now_width} of Gen{gen} x{width}"
    base = {"component": f"GPU{gpu.index}", "name": f"PCIe link Gen{now_gen} x{now_width}",
            "unit": "GB/s", "measured": pcie_theoretical_gbs(now_gen, now_width),
            "spec": pcie_theoretical_gbs(gen, width),
            "source": "NVML current vs maximum link; line rate per direction (PCI-SIG)"}
    if now_width < width or (now_gen < gen and measured_under_load):
        verdict = "FAIL" if measured_under_load else "LOW"
        return Check(**base, verdict=verdict, cause=f"PCIe link trained at {text}",
                     action=_link_action(gpu, gen))
    if now_gen < gen:
        return Check(**base, verdict="INFO",
                     cause=f"{text} at idle: GPUs lower the link generation when idle; the "
                           "PCIe benchmark reads it again under load")
    return Check(**base, verdict="OK")


def check_clocks(gpu: GpuInfo) -> Check | None:
    """Clock event reasons that cost performance, seen under load (or in the snapshot)."""
    reasons = (gpu.under_load.slowdown_reasons if gpu.under_load else None) or [
        r for r in (gpu.clock_event_reasons or [])
        if r in {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                 "hw_power_brake_slowdown", "sw_power_cap"}
    ]
    if gpu.clock_event_reasons is None and gpu.under_load is None:
        return None
    base = {"component": f"GPU{gpu.index}", "name": "clock slowdown reasons", "unit": None,
            "source": "NVML clock event reasons bitmask (MODELING.md)"}
    hard = [r for r in reasons if r in {"hw_slowdown", "hw_thermal_slowdown",
                                        "hw_power_brake_slowdown"}]
    if hard:
        return Check(**base, verdict="FAIL", cause="hardware slowdown: " + ", ".join(hard),
                     action="check cooling and power delivery; nvidia-smi -q -d PERFORMANCE")
    if "sw_thermal_slowdown" in reasons:
        return Check(**base, verdict="LOW", cause="driver slowing clocks for heat",
                     action="check airflow, fans and inlet temperature")
    if "sw_power_cap" in reasons and _power_capped(gpu):
        return Check(**base, verdict="LOW", cause="clocks held at a lowered power limit",
                     action=f"raise the limit: nvidia-smi -pl {gpu.power_limit_default_w:.0f}")
    cause = "power-cap reason set: normal when a busy GPU reaches its limit" \
        if "sw_power_cap" in reasons else None
    return Check(**base, verdict="OK", cause=cause)


def check_power_limit(gpu: GpuInfo, spec: GPU | None) -> Check | None:
    if not gpu.power_limit_w:
        return None
    reference = gpu.power_limit_default_w or (spec.tdp_w if spec else None)
    check = Check(component=f"GPU{gpu.index}", name="power limit", unit="W",
                  measured=gpu.power_limit_w, spec=spec.tdp_w if spec else reference,
                  expected=reference, ratio=gpu.power_limit_w / reference if reference else None,
                  verdict="OK" if reference else "INFO", source="NVML enforced vs default limit")
    if reference and gpu.power_limit_w < POWER_CAP_RATIO * reference:
        return check.model_copy(update={
            "verdict": "LOW",
            "cause": f"power capped at {gpu.power_limit_w:.0f} of {reference:.0f} W",
            "action": f"nvidia-smi -pl {reference:.0f} (root), or ask the provider",
        })
    return check


def check_temperature(gpu: GpuInfo) -> Check | None:
    hottest = (gpu.under_load.temperature_c_max if gpu.under_load else None) or gpu.temperature_c
    if hottest is None or gpu.temperature_slowdown_c is None:
        return None
    hot = hottest >= gpu.temperature_slowdown_c - THERMAL_MARGIN_C
    return Check(component=f"GPU{gpu.index}", name="temperature", unit="°C",
                 measured=float(hottest), spec=float(gpu.temperature_slowdown_c),
                 verdict="LOW" if hot else "OK",
                 cause=f"{hottest} °C, slowdown at {gpu.temperature_slowdown_c} °C" if hot else None,
                 action="check airflow, fans, inlet temperature and blanking panels" if hot else None,
                 source="NVML slowdown threshold")


def check_ecc(gpu: GpuInfo) -> Check | None:
    base = {"component": f"GPU{gpu.index}", "name": "memory errors", "unit": "errors",
            "measured": None if gpu.ecc_uncorrected_volatile is None
            else float(gpu.ecc_uncorrected_volatile),
            "source": "NVML ECC counters and row remapping"}
    if gpu.ecc_uncorrected_volatile or gpu.remapped_rows_failure:
        return Check(**base, verdict="FAIL",
                     cause="uncorrectable memory errors" + (
                         " and a failed row remap" if gpu.remapped_rows_failure else ""),
                     action="drain the node and reset the GPU; replace it if errors recur")
    if gpu.remapped_rows_pending:
        return Check(**base, verdict="LOW", cause="row remapping pending",
                     action="reset the GPU (nvidia-smi -r) when idle to apply it")
    if gpu.ecc_uncorrected_volatile is None and gpu.remapped_rows_pending is None:
        return None
    return Check(**base, verdict="OK")


def check_nvlink(gpu: GpuInfo, n_gpus: int) -> Check | None:
    if not gpu.nvlink_links or gpu.nvlink_active_links is None:
        return None
    base = {"component": f"GPU{gpu.index}", "name": "NVLinks active", "unit": "links",
            "measured": float(gpu.nvlink_active_links), "spec": float(gpu.nvlink_links),
            "source": "NVML link state"}
    if gpu.nvlink_active_links == gpu.nvlink_links:
        return Check(**base, verdict="OK")
    if gpu.nvlink_active_links == 0 and n_gpus > 1:
        return Check(**base, verdict="FAIL", cause="no NVLink active: GPUs talk over PCIe",
                     action="start nvidia-fabricmanager (NVSwitch systems); reseat bridges")
    if gpu.nvlink_active_links == 0:
        return Check(**base, verdict="INFO", cause="NVLinks down on a single visible GPU")
    down = gpu.nvlink_links - gpu.nvlink_active_links
    return Check(**base, verdict="LOW", cause=f"{down} of {gpu.nvlink_links} NVLinks down",
                 action="nvidia-smi nvlink --status; reset the GPU or have the board serviced")


def check_p2p(pair: P2PPair, spec: GPU | None, link: Callable[[str], Link | None]) -> Check:
    expected, source = None, None
    nv = link(spec.scale_up) if spec and spec.scale_up else None
    if nv is not None:
        expected = nv.bandwidth_gbs * nv.efficiency
        source = f"catalog {nv.id}: {nv.bandwidth_gbs:g} GB/s per direction × {nv.efficiency:g}"
    return _check(f"GPU{pair.src}→GPU{pair.dst}", "peer copy", "GB/s", pair.gbs, expected,
                  nv.bandwidth_gbs if nv else None,
                  cause="peer access disabled: copies staged through host memory"
                  if not pair.peer_access else "NVLinks down or P2P routed over PCIe",
                  action="nvidia-smi topo -m; check NVLink state and that P2P is not disabled "
                         "(NCCL_P2P_DISABLE, IOMMU)", source=source)


def check_collective(result: CollectivesResult, op: str, spec: GPU | None,
                     link: Callable[[str], Link | None], nics: list[NicInfo]) -> Check:
    measured = result.peak(op)
    component = f"{result.world_size} ranks" + (f", {result.nnodes} nodes" if result.nnodes > 1
                                                else "")
    name = f"{op} busbw ({result.backend})"
    if result.device != "cuda":
        return _check(component, name, "GB/s", measured, None,
                      cause="gloo on CPU: a functional check, no hardware reference",
                      source="nccl-tests doc/PERFORMANCE.md bus bandwidth")
    if result.nnodes > 1:
        expected, spec_gbs, source = _inter_node_expected(nics, result.local_world_size)
        cause = "network slower than its line rate, or GPUDirect RDMA not in use"
        action = "check NCCL_DEBUG=INFO for NET/IB vs Socket, NIC speeds and NUMA affinity"
    else:
        expected, spec_gbs, source = _intra_node_expected(spec, link)
        cause = "NVLinks down, P2P disabled, or collectives routed over PCIe"
        action = "nvidia-smi topo -m and nvlink --status; run nccl-tests with NCCL_DEBUG=INFO"
    return _check(component, name, "GB/s", measured, expected, spec_gbs, cause=cause,
                  action=action, source=source)


def _intra_node_expected(spec: GPU | None, link: Callable[[str], Link | None],
                         ) -> tuple[float | None, float | None, str | None]:
    if spec is None:
        return None, None, None
    if spec.scale_up:
        nv = link(spec.scale_up)
        if nv is not None:
            return (nv.bandwidth_gbs * nv.efficiency, nv.bandwidth_gbs,
                    f"{nv.id} {nv.bandwidth_gbs:g} GB/s × {nv.efficiency:g} (nccl-tests#212)")
        if spec.scale_up_gbs:
            rate = spec.scale_up_gbs / 2
            return rate * NVLINK_RING_EFFICIENCY, rate, "ring 78–88% of NVLink (nccl-tests#212)"
    rate = pcie_expected_gbs(spec.pcie_gen, spec.pcie_lanes, link)
    return rate, pcie_theoretical_gbs(spec.pcie_gen, spec.pcie_lanes), "PCIe-bound ring"


def _inter_node_expected(nics: list[NicInfo], gpus_per_node: int,
                         ) -> tuple[float | None, float | None, str | None]:
    fast = [n.speed_mbps for n in nics if n.speed_mbps and n.is_up and n.kind != "virtual"]
    if not fast:
        return None, None, None
    per_gpu_gbs = sum(fast) / 8e3 / max(1, gpus_per_node)
    return (per_gpu_gbs * INTER_NODE_NIC_EFFICIENCY, per_gpu_gbs,
            "~73% of NIC line rate per GPU (ml-engineering network/README)")


# -- host checks --------------------------------------------------------------------------------------
def check_cpu_cores(cpu: CpuInfo, n_gpus: int) -> Check | None:
    if n_gpus == 0:
        return None
    cores = cpu.cgroup_quota_cores or cpu.usable_cpus or cpu.threads_logical
    if not cores:
        return None
    needed = n_gpus * (LOADER_WORKERS_PER_GPU + 1) + SYSTEM_CORES
    check = _check("CPU", "cores for data loading", "cores", float(cores), float(needed),
                   cause=f"{cores:g} cores for {n_gpus} GPUs; ~{needed} needed for "
                         f"{LOADER_WORKERS_PER_GPU} loader workers per GPU",
                   action="fewer loader workers per GPU, or a node with more cores",
                   source="GPUs × (workers + 1) + a few (ml-engineering compute/cpu)")
    return check if check.verdict != "FAIL" else check.model_copy(update={"verdict": "LOW"})


def check_host_ram(memory: MemoryInfo, gpus: list[GpuInfo]) -> Check | None:
    gpu_gib = sum(g.memory_total_gib or 0 for g in gpus)
    if not gpu_gib:
        return None
    ram_gib = (memory.cgroup_limit_bytes or memory.total_bytes) / 2**30
    check = _check("node", "host RAM vs GPU memory", "GiB", ram_gib, gpu_gib,
                   cause=f"{ram_gib:.0f} GiB RAM for {gpu_gib:.0f} GiB of GPU memory",
                   action="expect trouble loading checkpoints and memory-mapped datasets; "
                          "use a node with more RAM",
                   source="RAM ≥ total GPU memory (ml-engineering compute/cpu-memory)")
    return check if check.verdict != "FAIL" else check.model_copy(update={"verdict": "LOW"})


_STORAGE_CLASS = {"nvme": "nvme-gen4", "ssd": "sata-ssd", "hdd": "hdd", "network": "nfs"}


def check_storage(result: StorageResult, storage: Callable[[str], Storage | None]) -> list[Check]:
    entry = storage(_STORAGE_CLASS.get(result.device_kind or "", ""))
    checks = []
    for name, measured, attribute in (("read (cache bypassed)", result.read_gbs, "seq_read_gbs"),
                                      ("write + fsync", result.write_gbs, "seq_write_gbs")):
        spec = getattr(entry, attribute) if entry else None
        check = Check(component=f"storage {result.path}", name=f"sequential {name}", unit="GB/s",
                      measured=measured, spec=spec, verdict="INFO",
                      cause=None if entry else f"{result.device_kind or 'unknown'} device: no "
                      "catalog class to compare with",
                      source=f"catalog {entry.id}" if entry else None)
        if entry and measured is not None and spec and measured < STORAGE_LOW_RATIO * spec:
            check = check.model_copy(update={
                "verdict": "LOW", "ratio": measured / spec,
                "cause": f"{measured:.2f} GB/s, the {entry.id} class does {spec:g}",
                "action": "check the device (nvme smart-log, iostat) or stage data on faster disk"})
        checks.append(check)
    return checks


def check_nic(nic: NicInfo) -> Check | None:
    if nic.kind == "virtual" or not nic.is_up:
        return None
    if nic.speed_mbps and nic.max_speed_mbps and nic.speed_mbps < nic.max_speed_mbps:
        return Check(component=nic.name, name="link speed", unit="Gb/s",
                     measured=nic.speed_mbps / 1e3, spec=nic.max_speed_mbps / 1e3,
                     ratio=nic.speed_mbps / nic.max_speed_mbps, verdict="LOW",
                     cause=f"linked at {nic.speed_mbps / 1e3:g} Gb/s of "
                           f"{nic.max_speed_mbps / 1e3:g} supported",
                     action="check cable/transceiver, switch port and autonegotiation",
                     source="ethtool supported link modes")
    if nic.speed_mbps:
        return Check(component=nic.name, name="link speed", unit="Gb/s",
                     measured=nic.speed_mbps / 1e3, verdict="INFO", source="kernel link speed")
    return None


# -- the whole result ---------------------------------------------------------------------------------
def evaluate(result: ProbeResult, specs: Specs) -> list[Check]:
    """Every check that applies to `result`, worst first."""
    checks: list[Check | None] = []
    bench = result.benchmarks
    pcie_by_gpu = {p.gpu_index: p for p in bench.pcie}
    for gpu in result.gpus:
        checks += _gpu_checks(gpu, specs, result, pcie_by_gpu.get(gpu.index))
    if bench.p2p:
        checks += [check_p2p(p, specs.gpus.get(p.src), specs.link) for p in bench.p2p.pairs]
    if bench.collectives:
        spec = next(iter(specs.gpus.values()), None)
        checks += [check_collective(bench.collectives, op.op, spec, specs.link, result.system.nics)
                   for op in bench.collectives.ops if op.peak_busbw_gbs is not None]
    checks += _host_checks(result, specs)
    present = [c for c in checks if c is not None]
    return sorted(present, key=lambda c: VERDICT_ORDER[c.verdict])


def _gpu_checks(gpu: GpuInfo, specs: Specs, result: ProbeResult,
                pcie: PcieResult | None) -> list[Check | None]:
    spec = specs.gpus.get(gpu.index)
    checks: list[Check | None] = []
    if spec is None:
        checks.append(Check(component=f"GPU{gpu.index}", name="catalog match", verdict="INFO",
                            cause=gpu.catalog_note or "not in the catalog",
                            action="add the GPU with --catalog DIR to compare with its spec"))
    checks += [check_pcie_link(gpu, spec, pcie), check_clocks(gpu), check_power_limit(gpu, spec),
               check_temperature(gpu), check_ecc(gpu), check_nvlink(gpu, len(result.gpus))]
    for gemm in result.benchmarks.gemm:
        if gemm.gpu_index == gpu.index:
            checks += [check_gemm(gpu, p.precision, p.best_tflops, spec)
                       for p in gemm.precisions if p.best_tflops is not None]
    for copy in result.benchmarks.memory:
        if copy.gpu_index == gpu.index:
            checks.append(check_memory_bandwidth(gpu, copy.copy_gbs, spec))
    if pcie is not None:
        checks += [check_pcie(gpu, "host→device", pcie.h2d_pinned_gbs, spec, pcie, specs.link),
                   check_pcie(gpu, "device→host", pcie.d2h_pinned_gbs, spec, pcie, specs.link)]
    return checks


def _host_checks(result: ProbeResult, specs: Specs) -> list[Check | None]:
    bench, system = result.benchmarks, result.system
    checks: list[Check | None] = [check_cpu_cores(system.cpu, len(result.gpus)),
                                  check_host_ram(system.memory, result.gpus)]
    checks += [check_nic(nic) for nic in system.nics]
    if bench.storage:
        checks += check_storage(bench.storage, specs.storage)
    if bench.hostmem:
        checks.append(Check(component="node", name="host memory copy (all cores)", unit="GB/s",
                            measured=bench.hostmem.copy_gbs_all_cores, verdict="INFO",
                            cause="no DIMM configuration known to compare with"))
    if bench.cpu:
        checks.append(Check(component="CPU", name="tokenization (all cores)", unit="tokens/s",
                            measured=bench.cpu.tokenize_tokens_per_s_all_cores, verdict="INFO"))
    return checks
