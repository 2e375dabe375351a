"""A probe result → the `HardwareProfile` that `estimate`, `plan` and `validate` accept."""

from __future__ import annotations

from trainrig.probe.results import ProbeResult
from trainrig.specs import HardwareProfile

__all__ = ["to_profile"]


def to_profile(result: ProbeResult) -> HardwareProfile:
    """Measured ceilings of the node. Per-GPU figures are the slowest GPU's: a synchronous
    data-parallel step runs at the pace of its slowest member."""
    bench, system = result.benchmarks, result.system
    gpu = result.gpus[0] if result.gpus else None
    collectives = bench.collectives
    busbw = collectives.peak("all_reduce") if collectives and collectives.device == "cuda" else None
    return HardwareProfile(
        gpu_name=gpu.name if gpu else None,
        gpu_catalog_id=gpu.catalog_id if gpu else None,
        measured_at=result.measured_at,
        gemm_tflops=_gemm(result),
        gemm_expected_tflops=_gemm_expected(result),
        memory_bandwidth_gbs=_lowest(c.copy_gbs for c in bench.memory if c.gpu_index is not None),
        pcie_h2d_gbs=_lowest(p.h2d_pinned_gbs for p in bench.pcie),
        pcie_d2h_gbs=_lowest(p.d2h_pinned_gbs for p in bench.pcie),
        intra_node_busbw_gbs=busbw if collectives and collectives.nnodes == 1 else None,
        inter_node_busbw_gbs=busbw if collectives and collectives.nnodes > 1 else None,
        host_memory_bandwidth_gbs=bench.hostmem.copy_gbs_all_cores if bench.hostmem else None,
        storage_read_gbs=bench.storage.read_gbs if bench.storage else None,
        storage_write_gbs=bench.storage.write_gbs if bench.storage else None,
        tokenize_tokens_per_s_per_core=bench.cpu.tokenize_tokens_per_s_per_core if bench.cpu
        else None,
        collate_tokens_per_s_per_core=bench.cpu.collate_tokens_per_s_per_core if bench.cpu
        else None,
        tokenize_tokens_per_s_all_cores=bench.cpu.tokenize_tokens_per_s_all_cores if bench.cpu
        else None,
        cpu_cores=system.cpu.cores_physical,
        n_gpus=len(result.gpus),
        host_ram_gib=(system.memory.cgroup_limit_bytes or system.memory.total_bytes) / 2**30,
        p2p_gbs=_lowest(p.gbs for p in bench.p2p.pairs) if bench.p2p else None,
        quick=result.quick,
    )


def _gemm(result: ProbeResult) -> dict[str, float]:
    """Best TFLOP/s per precision, the slowest GPU's; GPU results only (not a CPU test run)."""
    best: dict[str, float] = {}
    for gemm in result.benchmarks.gemm:
        if gemm.gpu_index is None:
            continue
        for precision in gemm.precisions:
            if precision.best_tflops is None:
                continue
            current = best.get(precision.precision)
            best[precision.precision] = min(current, precision.best_tflops) if current \
                else precision.best_tflops
    return best


def _gemm_expected(result: ProbeResult) -> dict[str, float]:
    """Per precision, the health check's expected rate for the GPU that measured the lowest rate
    (the one `gemm_tflops` keeps)."""
    lowest: dict[str, tuple[float, float]] = {}
    for check in result.checks:
        precision, _, rest = check.name.partition(" ")
        if rest != "GEMM (best shape)" or not check.measured or not check.expected:
            continue
        if precision not in lowest or check.measured < lowest[precision][0]:
            lowest[precision] = (check.measured, check.expected)
    return {precision: expected for precision, (_, expected) in lowest.items()}


def _lowest(values) -> float | None:
    present = [v for v in values if v]
    return min(present) if present else None
