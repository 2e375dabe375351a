"""The bench loop: build the scaled model, warm up, time K steps, read the peaks, compare.

Timing goes through one clock object: CUDA events on a GPU (the GPU's own time, read after one
synchronize), `time.perf_counter` on the CPU, or any `now()` a test injects. Peak memory is read
with `torch.cuda.max_memory_*` after a reset past the warm-up, so it is the steady-state peak with
the optimizer states already allocated. On CUDA the allocator is capped at the free memory minus a
margin before anything is built, and an out-of-memory becomes a result, not a traceback.
"""

from __future__ import annotations

import contextlib
import gc
import platform
import time
from collections.abc import Callable
from typing import Any

from trainrig.bench.model import (
    base_param_count,
    build_model,
    cast_model,
    check_buildable,
    check_fp8_device,
    import_torch,
    make_optimizer,
    precision_plan,
    quantize_base,
    trainable_param_count,
)
from trainrig.bench.result import BenchResult, RankRun, StepTimes, combine_ranks, compare, estimate_figures
from trainrig.bench.scale import scaled_job, scaled_mapping
from trainrig.catalog.job_file import load_job
from trainrig.errors import TrainrigError
from trainrig.specs import Job
from trainrig.units import GIB

__all__ = ["run_bench", "make_clock", "PerfClock", "CudaClock", "resolve_layers", "resolve_gpus", "measure_rank",
           "memory_cap", "parallel_label", "gpu_catalog_id", "CPU_DEFAULT_LAYERS", "MAX_STEPS", "MAX_CPU_PROCESSES"]

CPU_DEFAULT_LAYERS = 2
MAX_STEPS = 10_000
MAX_CPU_PROCESSES = 16
"""Data-parallel CPU processes at most: the CPU path exists to exercise the distributed code."""
Progress = Callable[[str, int, int, float | None], None]
"""progress(phase, step, of_steps, loss): phase is `warm-up` or `timed`; the loss of a timed step is
None, because reading it would synchronize the GPU inside the timed loop."""


class PerfClock:
    """Host wall-clock time; exact on the CPU, where every op is synchronous."""

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now

    def mark(self) -> float:
        return self.now()

    def seconds(self, start: float, end: float) -> float:
        return end - start

    def sync(self) -> None:
        pass


class CudaClock:
    """CUDA events recorded on the stream: the GPU's time between marks, free of host jitter."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def mark(self) -> Any:
        event = self.torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        return start.elapsed_time(end) / 1000.0  # elapsed_time is in milliseconds

    def sync(self) -> None:
        self.torch.cuda.synchronize()


def make_clock(torch: Any, device: str, now: Callable[[], float] | None = None) -> PerfClock | CudaClock:
    """The clock for a device; an injected `now` always wins (tests)."""
    if now is not None or device == "cpu":
        return PerfClock(now or time.perf_counter)
    return CudaClock(torch)


def resolve_device(torch: Any, device: str | None) -> str:
    if device not in (None, "cpu", "cuda"):
        raise TrainrigError("--device", f"must be cpu or cuda (got {device!r}).")
    cuda = bool(torch.cuda.is_available())
    if device == "cuda" and not cuda:
        raise TrainrigError("--device", "cuda was asked for, but torch sees no CUDA device here.")
    return device or ("cuda" if cuda else "cpu")


def check_counts(steps: int, warmup: int) -> None:
    if not 1 <= steps <= MAX_STEPS:
        raise TrainrigError("--steps", f"must be between 1 and {MAX_STEPS} (got {steps}).")
    if not 0 <= warmup <= MAX_STEPS:
        raise TrainrigError("--warmup", f"must be between 0 and {MAX_STEPS} (got {warmup}).")


def resolve_layers(job: Job, layers: int | None, device: str, budget_gib: float | None, n_gpus: int = 1) -> int:
    """The layers to build: as given (checked), 2 on the CPU, else the most whose estimated reserved
    peak fits the budget (at least 1: the capped allocator turns a wrong estimate into an OOM result)."""
    full = job.model.n_layers
    if layers is not None:
        if not 1 <= layers <= full:
            raise TrainrigError("--layers", f"must be between 1 and the model's {full} layers (got {layers}).")
        return layers
    if device == "cpu" or budget_gib is None:
        return min(CPU_DEFAULT_LAYERS, full)
    from trainrig.estimate import estimate

    low, high = 1, full  # the estimated memory grows with layers: bisect for the largest that fits
    while low < high:
        middle = (low + high + 1) // 2
        if estimate(scaled_job(job, middle, n_gpus)[0]).memory_reserved_gib <= budget_gib:
            low = middle
        else:
            high = middle - 1
    return low


def run_bench(job: Job, layers: int | None = None, steps: int = 5, warmup: int = 2, device: str | None = None,
              now: Callable[[], float] | None = None, progress: Progress | None = None, gpus: int | None = None
              ) -> tuple[BenchResult, dict[str, Any]]:
    """Bench the job here: (the result, the scaled job's mapping for a measured-run file). With more
    than one GPU (`gpus`, default: the job's data-parallel width on this node's GPUs; 1 on the CPU) the
    ranks run data-parallel in their own processes (`trainrig.bench.distributed`)."""
    from trainrig.estimate import estimate

    check_counts(steps, warmup)
    check_buildable(job.model, job.training)
    torch = import_torch()
    device = resolve_device(torch, device)
    check_fp8_device(torch, job.training, device)
    n_gpus = resolve_gpus(torch, job, gpus, device)
    if n_gpus > 1 and job.training.zero >= 1 and job.training.base_quantization != "none":
        raise TrainrigError("--gpus", "a quantized base under FSDP is not available in bench yet; bench it on one"
                                      " GPU or with zero: 0 (DDP).")
    budget_gib = _cuda_budget_gib(torch) if device == "cuda" else None
    n_layers = resolve_layers(job, layers, device, budget_gib, n_gpus)
    mapping, notes = scaled_mapping(job, n_layers, n_gpus)
    scaled = load_job(mapping)
    estimated, full = estimate_figures(estimate(scaled)), estimate_figures(estimate(job))
    if device == "cpu" and job.training.optimizer.startswith("paged_"):
        notes.append(f"{job.training.optimizer} runs unpaged on the CPU (bitsandbytes pages only CUDA memory)")
    result = _empty_result(torch, job, scaled, device, steps, warmup, estimated, full, notes, n_gpus)
    tokens_per_step = scaled.training.micro_batch * scaled.training.seq_len * n_gpus
    if n_gpus > 1:
        from trainrig.bench.distributed import run_ranks

        runs = run_ranks(scaled, n_gpus, device, steps, warmup, budget_gib, progress)
    else:
        runs = _one_rank(torch, scaled, device, make_clock(torch, device, now), steps, warmup, budget_gib, progress)
    if runs is None:
        result.oom_message = _oom_sentence(scaled, estimated, budget_gib)
    else:
        result.measured = combine_ranks(runs, tokens_per_step)
        result.params_built, result.trainable_params = runs[0].params_built, runs[0].trainable_params
        result.error_pct, result.projection = compare(result.measured, estimated, full)
    return result, mapping


def resolve_gpus(torch: Any, job: Job, gpus: int | None, device: str) -> int:
    """Processes to run: as given (checked), else on CUDA the job's data-parallel width capped at this
    node's GPUs, on the CPU one."""
    local = torch.cuda.device_count() if device == "cuda" else MAX_CPU_PROCESSES
    if gpus is not None:
        if not 1 <= gpus <= local:
            where = f"the {local} GPUs torch sees" if device == "cuda" else f"{local} CPU processes"
            raise TrainrigError("--gpus", f"must be between 1 and {where} (got {gpus}).")
        return gpus
    return min(job.training.dp, local) if device == "cuda" else 1


def _one_rank(torch: Any, job: Job, device: str, clock: Any, steps: int, warmup: int, budget_gib: float | None,
              progress: Progress | None) -> list[RankRun] | None:
    """This process as the only rank: its run, or None after an out-of-memory."""
    with memory_cap(torch, device, budget_gib):
        try:
            return [measure_rank(torch, job, device, clock, steps, warmup, progress)]
        except (torch.OutOfMemoryError, MemoryError):
            return None
        finally:
            gc.collect()  # the failed step's tensors are referenced from the traceback until now
            if device == "cuda":
                torch.cuda.empty_cache()


def _empty_result(torch: Any, job: Job, scaled: Job, device: str, steps: int, warmup: int,
                  estimated: dict[str, float], full: dict[str, float], notes: list[str], n_gpus: int) -> BenchResult:
    plan = precision_plan(scaled.training, device)
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else _cpu_name()
    warnings = []
    if device == "cpu" or gpu_catalog_id(torch) != job.hardware.gpu.id:
        warnings.append(f"measured on {device_name}, estimated for {job.hardware.gpu.name}: the errors and the"
                        " projection compare two different machines")
    return BenchResult(
        model=job.model.name, device=device, device_name=device_name, estimated_gpu=job.hardware.gpu.name,
        n_layers=scaled.model.n_layers, n_layers_full=job.model.n_layers, micro_batch=scaled.training.micro_batch,
        seq_len=scaled.training.seq_len, dtype=plan.label, steps=steps, warmup=warmup,
        torch_version=str(torch.__version__), n_gpus=n_gpus, parallel=parallel_label(scaled.training, n_gpus),
        params_built=0, trainable_params=0, measured=None, estimated=estimated, full_estimate=full, notes=notes,
        warnings=warnings)


def parallel_label(training: Any, n_gpus: int) -> str:
    """How the ranks share the work, in words: what `trainrig.bench.distributed` wraps the model in."""
    if n_gpus == 1:
        return "one process"
    if training.zero == 0:
        return f"DDP over {n_gpus} processes"
    keep = "resharded after forward (ZeRO-3)" if training.zero >= 3 else "kept after forward (ZeRO-2)"
    return f"FSDP over {n_gpus} processes, parameters {keep}"


def measure_rank(torch: Any, job: Job, device: str, clock: Any, steps: int, warmup: int,
                 progress: Progress | None, wrap: Callable[[Any], Any] | None = None, seed: int = 0) -> RankRun:
    """Build (and `wrap`, for data parallelism), run warm-up and timed steps; this process's run.
    The weights start the same on every rank (seed 0); the data differs by `seed`."""
    torch.manual_seed(0)
    spec, training = job.model, job.training
    plan = precision_plan(training, device)
    with torch.device(device):  # built where it runs: no full fp32 copy in host memory first
        model = cast_model(torch, build_model(torch, spec, training, spec.n_layers), plan, device)
    params_built, trainable = base_param_count(model), trainable_param_count(model)
    model = quantize_base(torch, model, training, plan, device)
    model.train()
    if wrap is not None:
        model = wrap(model)
    optimizer = make_optimizer(torch, model, training, device)
    generator = torch.Generator(device=device).manual_seed(seed)
    shape = (training.micro_batch, training.seq_len)
    tokens = torch.randint(spec.vocab, shape, device=device, generator=generator)
    labels = torch.randint(spec.vocab, shape, device=device, generator=generator)
    autocast = _autocast(torch, device, plan.autocast_dtype)
    for index in range(warmup):
        loss = _step(torch, model, optimizer, tokens, labels, autocast, None)
        _report(progress, "warm-up", index, warmup, loss)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    timed, losses = [], []
    for index in range(steps):
        marks: list[Any] = []
        losses.append(_step(torch, model, optimizer, tokens, labels, autocast, (clock, marks)))
        timed.append(marks)
        _report(progress, "timed", index, steps, None)
    clock.sync()
    times = [StepTimes(*(clock.seconds(m[i], m[i + 1]) for i in range(3))) for m in timed]
    allocated, reserved = _peaks_gib(torch, device)
    loss_values = [float(loss) for loss in losses]  # read after timing: .item() would synchronize inside it
    checksum = float(sum(p.detach().double().sum() for p in _local_tensors(model)))
    return RankRun(times=times, peak_allocated_gib=allocated, peak_reserved_gib=reserved,
                   loss_first=loss_values[0], loss_last=loss_values[-1], params_built=params_built,
                   trainable_params=trainable, parameter_checksum=checksum)


def _local_tensors(model: Any) -> list[Any]:
    """This rank's parameter storage: FSDP's sharded parameters are DTensors, whose local part is
    what this rank holds."""
    return [getattr(p, "_local_tensor", p) for p in model.parameters()]


def _step(torch: Any, model: Any, optimizer: Any, tokens: Any, labels: Any, autocast: Any,
          timing: tuple[Any, list[Any]] | None) -> Any:
    """One training step; with `timing`, a clock mark before the forward and after each phase."""
    mark = (lambda: timing[1].append(timing[0].mark())) if timing else (lambda: None)
    mark()
    with autocast():
        logits = model(tokens)
    # the loss in fp32, as PyTorch's full cross-entropy upcasts (the estimate's logits term)
    loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
    mark()
    loss.backward()
    mark()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    mark()
    return loss.detach()


def _autocast(torch: Any, device: str, dtype: str | None) -> Callable[[], Any]:
    if dtype is None:
        return contextlib.nullcontext
    return lambda: torch.autocast(device_type=device, dtype=getattr(torch, dtype))


def _peaks_gib(torch: Any, device: str) -> tuple[float | None, float | None]:
    if device != "cuda":
        return None, None  # no allocator statistics on the CPU
    return torch.cuda.max_memory_allocated() / GIB, torch.cuda.max_memory_reserved() / GIB


def _report(progress: Progress | None, phase: str, index: int, total: int, loss: Any) -> None:
    if progress is not None:
        progress(phase, index + 1, total, None if loss is None else float(loss))


def _cuda_budget_gib(torch: Any) -> float:
    from trainrig.probe.torch_bench import gpu_budget_bytes

    return gpu_budget_bytes(torch, torch.device("cuda", 0)) / GIB


@contextlib.contextmanager
def memory_cap(torch: Any, device: str, budget_gib: float | None):
    """Cap the caching allocator at what it holds now plus the budget, so the bench can never take
    memory beyond free minus the margin: past it the allocator raises OutOfMemoryError."""
    if device != "cuda" or budget_gib is None:
        yield
        return
    total = torch.cuda.get_device_properties(0).total_memory
    held = torch.cuda.memory_reserved()
    torch.cuda.set_per_process_memory_fraction(min(1.0, (held + budget_gib * GIB) / total))
    try:
        yield
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)


def _oom_sentence(job: Job, estimated: dict[str, float], budget_gib: float | None) -> str:
    room = f"{budget_gib:.1f} GiB free less the margin" if budget_gib is not None else "the host's memory"
    return (f"out of memory at {job.model.n_layers} layers (micro-batch {job.training.micro_batch}, seq"
            f" {job.training.seq_len}): the estimate said {estimated['peak_reserved_gib']:.1f} GiB reserved of {room}.")


def gpu_catalog_id(torch: Any) -> str | None:
    """The catalog id of GPU 0, matched as `trainrig probe` matches it (None when unknown)."""
    from trainrig.catalog import load_catalog
    from trainrig.probe.catalog_match import match_gpu

    memory_gib = torch.cuda.get_device_properties(0).total_memory / GIB
    return match_gpu(torch.cuda.get_device_name(0), memory_gib, load_catalog().gpus).catalog_id


def _cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "CPU"
