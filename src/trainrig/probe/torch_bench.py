"""GPU microbenchmarks with torch (the optional extra `trainrig[torch]`, imported lazily).

Every function takes the torch module and a device, so that the same code runs on `cuda:N` (timed
with CUDA events) and, in tests, on `cpu` (timed with perf_counter). Timing: warm-up calls, then an
inner loop long enough to time reliably, repeated; the median per-call time is kept. GEMM inputs
are random (never zeros, which some hardware multiplies faster). GPU allocations stay below the free
memory minus a margin, and everything is freed afterwards.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from trainrig.probe.results import (
    DeviceCopyResult,
    GemmPoint,
    GemmPrecision,
    GemmResult,
    P2PPair,
    P2PResult,
    PcieResult,
    TorchInfo,
)

__all__ = ["import_torch", "torch_info", "time_per_call", "gemm_shapes", "gemm_bench",
           "device_copy_bench", "pcie_bench", "p2p_bench", "gpu_budget_bytes", "PRECISIONS",
           "GPU_MARGIN_BYTES", "release"]

# Training precisions first: a time limit ends the sweep in this order, and on an H200 the fp32 and tf32
# sweeps alone took 29 s of a 60 s probe (gpu_check, 2026-12-04), leaving bf16 and fp8 unmeasured.
PRECISIONS = ("bf16", "fp8", "fp16", "tf32", "fp32")
GPU_MARGIN_BYTES = 1 << 30
"""Left free on every GPU (and at least 5% of it): CUDA context, cuBLAS workspace, other users."""
GPU_MARGIN_FRACTION = 0.05
MAX_INNER_CALLS = 1 << 14
TORCH_HINT = "install it with `pip install 'trainrig[torch]'`"

_DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}


def import_torch() -> tuple[Any | None, str | None]:
    """(torch, None), or (None, why not)."""
    try:
        import torch
    except ImportError:
        return None, f"torch is not installed; {TORCH_HINT}"
    return torch, None


def torch_info(torch: Any | None, reason: str | None) -> TorchInfo:
    if torch is None:
        return TorchInfo(available=False, reason=reason)
    cuda = bool(torch.cuda.is_available())
    return TorchInfo(
        available=True,
        version=torch.__version__,
        cuda_available=cuda,
        cuda_version=torch.version.cuda,
        device_count=torch.cuda.device_count() if cuda else 0,
        reason=None if cuda else "torch sees no CUDA device (CPU-only build or no GPU)",
    )


# -- timing ------------------------------------------------------------------------------------
def _is_cuda(device: Any) -> bool:
    return str(device).startswith("cuda")


def _synchronize(torch: Any, devices: list[Any]) -> None:
    for device in devices:
        if _is_cuda(device):
            torch.cuda.synchronize(device)


def _timed_loop(torch: Any, device: Any, fn: Callable[[], Any], calls: int,
                sync: list[Any] | None) -> float:
    """Seconds for `calls` calls: CUDA events on one GPU, else perf_counter around synchronize."""
    if _is_cuda(device) and sync is None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    devices = sync or [device]
    _synchronize(torch, devices)
    begin = time.perf_counter()
    for _ in range(calls):
        fn()
    _synchronize(torch, devices)
    return time.perf_counter() - begin


def time_per_call(torch: Any, device: Any, fn: Callable[[], Any], min_time_s: float = 0.05,
                  repeats: int = 3, warmup: int = 2, sync: list[Any] | None = None) -> float:
    """Median seconds per call of `fn` over `repeats` timed loops of at least `min_time_s`.

    `sync`: time with perf_counter and synchronize these devices (copies that span two GPUs or
    several streams), instead of CUDA events on `device`'s current stream.
    """
    for _ in range(warmup):
        fn()
    calls = 1
    elapsed = _timed_loop(torch, device, fn, calls, sync)
    while elapsed < min_time_s and calls < MAX_INNER_CALLS:
        grow = min_time_s / max(elapsed, 1e-7) * 1.2
        calls = min(MAX_INNER_CALLS, max(calls * 2, int(calls * grow)))
        elapsed = _timed_loop(torch, device, fn, calls, sync)
    times = [elapsed / calls]
    times += [_timed_loop(torch, device, fn, calls, sync) / calls for _ in range(repeats - 1)]
    return statistics.median(times)


# -- memory budget -------------------------------------------------------------------------------
def gpu_budget_bytes(torch: Any, device: Any) -> int:
    """Free memory of a GPU minus the margin; a large figure for the CPU."""
    if not _is_cuda(device):
        return 1 << 62
    free, total = torch.cuda.mem_get_info(device)
    return max(0, int(free - max(GPU_MARGIN_BYTES, GPU_MARGIN_FRACTION * total)))


def release(torch: Any, device: Any) -> None:
    """Give cached GPU memory back after a benchmark."""
    if _is_cuda(device):
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


# -- GEMM ------------------------------------------------------------------------------------------
def gemm_shapes(quick: bool) -> list[tuple[int, int, int]]:
    """(m, n, k) to sweep: squares, sizes off the power-of-two grid, and LLM-like layers."""
    if quick:
        return [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 4096)]
    squares = [(s, s, s) for s in (1024, 2048, 4096, 5120, 6144, 8192, 12288, 16384)]
    odd = [(4096 + 64, 4096 + 64, 4096 + 64), (8192 - 1, 8192 - 1, 8192 - 1)]
    llm = [  # tokens × hidden × ffn shapes of 8B/70B-class layers (MLP up/down, attention QKV)
        (16384, 14336, 4096), (16384, 4096, 14336), (16384, 6144, 4096),
        (16384, 28672, 8192), (16384, 8192, 28672),
    ]
    return squares + odd + llm


def _gemm_bytes(precision: str, m: int, n: int, k: int) -> int:
    """Inputs and output, plus for fp8 the fp32 temporary its random inputs are cast from."""
    size = _BYTES[precision]
    out = 2 if precision == "fp8" else size
    temporary = 4 * max(m * k, k * n) if precision == "fp8" else 0
    return size * (m * k + k * n) + out * m * n + temporary


@contextlib.contextmanager
def _matmul_precision(torch: Any, precision: str) -> Iterator[None]:
    """fp32 on the FP32 units ("highest") or through TF32 tensor cores ("high")."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def fp8_support(torch: Any, device: Any) -> str | None:
    """None when fp8 GEMMs run on `device`, else why not."""
    if not _is_cuda(device):
        return "fp8 GEMM needs a CUDA GPU"
    if not (hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")):
        return f"torch {torch.__version__} has no fp8 matmul"
    if torch.cuda.get_device_capability(device) < (8, 9):
        return "fp8 tensor cores need compute capability 8.9 (Ada/Hopper) or newer"
    try:
        _gemm_call(torch, device, "fp8", 32, 32, 32)()
    except RuntimeError as error:
        return f"fp8 matmul failed: {str(error).splitlines()[0][:120]}"
    return None


def _gemm_call(torch: Any, device: Any, precision: str, m: int, n: int, k: int) -> Callable[[], Any]:
    generator = torch.Generator(device=device).manual_seed(m + n + k)
    if precision == "fp8":
        a = torch.randn(m, k, device=device, generator=generator).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device, generator=generator).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                        use_fast_accum=True)
    dtype = getattr(torch, _DTYPES[precision])
    a = torch.randn(m, k, device=device, generator=generator, dtype=dtype)
    b = torch.randn(k, n, device=device, generator=generator, dtype=dtype)
    out = torch.empty(m, n, device=device, dtype=dtype)
    return lambda: torch.mm(a, b, out=out)


def gemm_bench(torch: Any, device: Any, precisions: tuple[str, ...],
               shapes: list[tuple[int, int, int]], *, min_time_s: float = 0.05, repeats: int = 3,
               peaks: dict[str, float | None] | None = None,
               should_stop: Callable[[], bool] = lambda: False,
               advance: Callable[[], None] = lambda: None) -> GemmResult:
    """Dense GEMM TFLOP/s (2·m·n·k per call) for each precision over `shapes`."""
    peaks = peaks or {}
    results = []
    for precision in precisions:
        results.append(_gemm_precision(torch, device, precision, shapes, min_time_s, repeats,
                                       peaks.get(precision), should_stop, advance))
        release(torch, device)
    return GemmResult(
        device=str(device),
        gpu_index=_index(device),
        precisions=results,
        method=(
            f"torch.mm on random inputs (torch._scaled_mm with unit scales and fast accumulation "
            f"for fp8 e4m3 → bf16 out); per shape: warm-up, inner loop ≥ {min_time_s * 1e3:.0f} ms "
            f"{'timed with CUDA events' if _is_cuda(device) else 'timed with perf_counter'}, "
            f"median of {repeats}; FLOPs = 2·m·n·k; tf32 = fp32 inputs with "
            "set_float32_matmul_precision('high')"
        ),
    )


def _gemm_precision(torch: Any, device: Any, precision: str, shapes: list[tuple[int, int, int]],
                    min_time_s: float, repeats: int, peak: float | None,
                    should_stop: Callable[[], bool], advance: Callable[[], None]) -> GemmPrecision:
    if precision == "fp8" and (reason := fp8_support(torch, device)):
        return GemmPrecision(precision=precision, peak_tflops=peak, skipped=reason)
    budget = gpu_budget_bytes(torch, device)
    points, skipped = [], []
    with _matmul_precision(torch, precision):
        for m, n, k in shapes:
            if should_stop():
                skipped.append("time limit")
                break
            if _gemm_bytes(precision, m, n, k) > budget:
                skipped.append(f"{m}x{n}x{k} exceeds free memory")
                continue
            try:
                seconds = _gemm_seconds(torch, device, precision, (m, n, k), min_time_s, repeats)
            except RuntimeError as error:  # includes CUDA out-of-memory; shapes fp8 rejects
                skipped.append(f"{m}x{n}x{k}: {str(error).splitlines()[0][:80]}")
                release(torch, device)
                continue
            finally:
                advance()
            points.append(GemmPoint(m=m, n=n, k=k, time_s=seconds,
                                    tflops=2 * m * n * k / seconds / 1e12))
    return _summarize(precision, points, peak, "; ".join(dict.fromkeys(skipped)) or None)


def _gemm_seconds(torch: Any, device: Any, precision: str, shape: tuple[int, int, int],
                  min_time_s: float, repeats: int) -> float:
    fn = _gemm_call(torch, device, precision, *shape)
    return time_per_call(torch, device, fn, min_time_s, repeats)


def _summarize(precision: str, points: list[GemmPoint], peak: float | None,
               skipped: str | None) -> GemmPrecision:
    if not points:
        return GemmPrecision(precision=precision, peak_tflops=peak, skipped=skipped or "no shape ran")
    best = max(points, key=lambda p: p.tflops)
    table = [p.model_copy(update={
        "fraction_of_best": p.tflops / best.tflops,
        "fraction_of_peak": p.tflops / peak if peak else None,
    }) for p in points]
    return GemmPrecision(
        precision=precision, best_tflops=best.tflops, best_shape=f"{best.m}x{best.n}x{best.k}",
        peak_tflops=peak, points=table, skipped=skipped,
    )


def _index(device: Any) -> int | None:
    text = str(device)
    return int(text.split(":")[1]) if text.startswith("cuda:") else None


# -- device memory -------------------------------------------------------------------------------
def device_copy_bench(torch: Any, device: Any, buffer_bytes: int, min_time_s: float = 0.05,
                      repeats: int = 3) -> DeviceCopyResult:
    """Device-to-device copy bandwidth: bytes read plus written per second."""
    budget = gpu_budget_bytes(torch, device)
    size = min(buffer_bytes, budget // 2) // 4 * 4
    if size < 1 << 20:
        raise MemoryError("less than 2 MiB of GPU memory free for the copy test")
    seconds = _copy_seconds(torch, device, size, min_time_s, repeats)
    release(torch, device)
    return DeviceCopyResult(
        device=str(device), gpu_index=_index(device), copy_gbs=2 * size / seconds / 1e9,
        buffer_bytes=size,
        method=(f"dst.copy_(src) of {size / 2**20:.0f} MiB float32 buffers, bytes read plus "
                f"written, median of {repeats} loops ≥ {min_time_s * 1e3:.0f} ms"),
    )


def _copy_seconds(torch: Any, device: Any, size: int, min_time_s: float, repeats: int) -> float:
    src = torch.rand(size // 4, device=device)
    dst = torch.empty_like(src)
    return time_per_call(torch, device, lambda: dst.copy_(src), min_time_s, repeats)


# -- PCIe -------------------------------------------------------------------------------------------
def pcie_bench(torch: Any, index: int, size_bytes: int, min_time_s: float = 0.05,
               repeats: int = 3, read_link: Callable[[], tuple[int | None, int | None]] | None = None,
               ) -> PcieResult:
    """Host↔device copies: pinned and pageable, each direction, and both directions at once."""
    device = torch.device(f"cuda:{index}")
    size = min(size_bytes, gpu_budget_bytes(torch, device) // 2)
    with torch.cuda.device(device):
        rates, link = _pcie_rates(torch, device, size, min_time_s, repeats, read_link)
    release(torch, device)
    return PcieResult(
        gpu_index=index, **rates, size_bytes=size, link_gen_during=link[0],
        link_width_during=link[1],
        method=(f"{size / 2**20:.0f} MiB copies; pinned: non_blocking copy_ timed with CUDA events; "
                "pageable (ordinary host memory) and both directions at once (two streams, "
                "total of both) timed with perf_counter around synchronize; median of "
                f"{repeats} loops ≥ {min_time_s * 1e3:.0f} ms; link generation and width read "
                "from NVML while copies ran"),
    )


def _pcie_rates(torch: Any, device: Any, size: int, min_time_s: float, repeats: int,
                read_link: Callable[[], tuple[int | None, int | None]] | None,
                ) -> tuple[dict[str, float], tuple[int | None, int | None]]:
    pinned = torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(7)
    pinned_2 = torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(7)
    pageable = torch.empty(size, dtype=torch.uint8).fill_(7)
    on_gpu = torch.empty(size, dtype=torch.uint8, device=device)
    on_gpu_2 = torch.empty(size, dtype=torch.uint8, device=device).fill_(3)
    up, down = torch.cuda.Stream(device), torch.cuda.Stream(device)
    torch.cuda.synchronize(device)

    def rate(fn: Callable[[], Any], sync: list[Any] | None = None, moved: int = size) -> float:
        return moved / time_per_call(torch, device, fn, min_time_s, repeats, sync=sync) / 1e9

    def both() -> None:
        with torch.cuda.stream(up):
            on_gpu.copy_(pinned, non_blocking=True)
        with torch.cuda.stream(down):
            pinned_2.copy_(on_gpu_2, non_blocking=True)

    rates = {
        "h2d_pinned_gbs": rate(lambda: on_gpu.copy_(pinned, non_blocking=True)),
        "d2h_pinned_gbs": rate(lambda: pinned.copy_(on_gpu_2, non_blocking=True)),
        "h2d_pageable_gbs": rate(lambda: on_gpu.copy_(pageable), sync=[device]),
        "d2h_pageable_gbs": rate(lambda: pageable.copy_(on_gpu_2), sync=[device]),
        "bidirectional_pinned_gbs": rate(both, sync=[device], moved=2 * size),
    }
    link = _link_under_copy(torch, lambda: on_gpu.copy_(pinned, non_blocking=True), read_link)
    return rates, link


def _link_under_copy(torch: Any, copy: Callable[[], Any],
                     read_link: Callable[[], tuple[int | None, int | None]] | None,
                     ) -> tuple[int | None, int | None]:
    """Read the PCIe link while copies are in flight: idle links drop to a lower generation."""
    if read_link is None:
        return None, None
    for _ in range(20):
        copy()
    link = read_link()
    torch.cuda.synchronize()
    return link


# -- GPU to GPU -------------------------------------------------------------------------------------
def p2p_bench(torch: Any, pairs: list[tuple[int, int]], size_bytes: int, min_time_s: float = 0.05,
              repeats: int = 3, should_stop: Callable[[], bool] = lambda: False,
              advance: Callable[[], None] = lambda: None) -> P2PResult:
    """One-directional copy rate between GPU pairs (peer-to-peer where the driver allows it)."""
    results = []
    for src, dst in pairs:
        if should_stop():
            break
        results.append(_p2p_pair(torch, src, dst, size_bytes, min_time_s, repeats))
        advance()
    return P2PResult(
        pairs=results, size_bytes=size_bytes,
        method=(f"{size_bytes / 2**20:.0f} MiB dst.copy_(src) between GPUs, perf_counter around "
                f"synchronize of both, median of {repeats}; without peer access the copy is "
                "staged through host memory by the driver"),
    )


def _p2p_pair(torch: Any, src: int, dst: int, size_bytes: int, min_time_s: float,
              repeats: int) -> P2PPair:
    a, b = torch.device(f"cuda:{src}"), torch.device(f"cuda:{dst}")
    size = min(size_bytes, gpu_budget_bytes(torch, a), gpu_budget_bytes(torch, b))
    seconds = _peer_seconds(torch, a, b, size, min_time_s, repeats)
    release(torch, a)
    release(torch, b)
    return P2PPair(src=src, dst=dst, peer_access=bool(torch.cuda.can_device_access_peer(src, dst)),
                   gbs=size / seconds / 1e9)


def _peer_seconds(torch: Any, a: Any, b: Any, size: int, min_time_s: float, repeats: int) -> float:
    source = torch.empty(size, dtype=torch.uint8, device=a).fill_(5)
    target = torch.empty(size, dtype=torch.uint8, device=b)
    return time_per_call(torch, a, lambda: target.copy_(source, non_blocking=True), min_time_s,
                         repeats, sync=[a, b])
