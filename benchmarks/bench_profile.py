"""Where a bench job's step time goes on the GPU: kernel time by kind, beside the estimate's step time.

    python benchmarks/bench_profile.py [--only llama3-8b,gpt3-1.3b] [--steps 2] [--warmup 2] [--out DIR]

Runs jobs of benchmarks/bench_set.py (cut to the same layers, estimated for the GPU it runs on) with
torch.profiler recording CUDA kernels over the timed steps only (it starts at the first timed step's
first clock mark and stops after its last), and sums kernel time per kind: GEMM, attention,
elementwise, normalisation and reductions, optimizer, copies, other. `busy` is the union of kernel
intervals over the profiled span: 1 − busy is time the GPU waited on the host (launches, Python). The
point is to see which term of the estimate a gap between measured and estimated step time is in.
With --out DIR: DIR/profile.json (per job: step times and their forward / backward / optimizer
medians, kernel seconds per kind, the 40 longest kernels with their calls, and the rate the GEMM
kernels reached in the step: the linear layers' and head's FLOPs over the GEMM kernels' seconds,
beside the best-shape rate the estimate gives them).
On the CPU the harness runs (its smoke test) but there are no kernels to sum.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import bench_set  # noqa: E402
from trainrig import load_job  # noqa: E402
from trainrig.bench.run import CudaClock, PerfClock, measure_rank  # noqa: E402
from trainrig.bench.scale import scaled_mapping  # noqa: E402
from trainrig.estimate import estimate  # noqa: E402
from trainrig.estimate.flops import layer_gemm_flops_per_token, logits_flops_per_token  # noqa: E402
from trainrig.estimate.inputs import inputs_from_job  # noqa: E402
from trainrig.estimate.params import DEFAULT_PARAMETERS  # noqa: E402

# first match wins; names as cuBLAS (sm90_xmma_gemm…, nvjet…, cutlass…), PyTorch's flash and
# memory-efficient attention, cuDNN's fused attention and ATen's own kernels print them
# the dense job, the three whose estimates were 8-27% off on the H200 (2026-12-04), GPT-3 and the MoE
DEFAULT_JOBS = ("llama3-8b", "llama3-8b-pure-bf16", "llama3-8b-lora", "llama3-8b-fp8", "gpt3-1.3b", "mixtral-8x7b")
LONGEST_KEPT = 40  # kernels kept by name in profile.json (run 2 kept 12: too few to place every copy)
KINDS = (
    ("attention", re.compile(r"flash|fmha|attention|sdpa|mha_|cudnn.*(fprop|bprop)", re.I)),
    ("gemm", re.compile(r"gemm|xmma|nvjet|cutlass|cublas|matmul|_mma_|splitk", re.I)),
    ("optimizer", re.compile(r"multi_tensor|adam|foreach", re.I)),  # not "lamb": every "lambda" matches it
    ("norm_reduce", re.compile(r"norm|reduce|softmax|cross_entropy|nll_loss|logsumexp", re.I)),
    ("copy", re.compile(r"memcpy|memset|copy|cat_|index|gather|scatter|embedding", re.I)),  # casts too
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|pointwise|fill|_kernel_impl", re.I)),
)


def kernel_kind(name: str) -> str:
    return next((kind for kind, pattern in KINDS if pattern.search(name)), "other")


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of [start, end) intervals (µs in, seconds out)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total / 1e6


def summarise_trace(trace: dict[str, Any]) -> dict[str, Any]:
    """Kernel seconds per kind, the busy fraction and the longest kernels of a Chrome trace."""
    kernels = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel" and "dur" in e]
    if not kernels:
        return {"kernels": 0, "kernel_s_by_kind": {}, "busy_fraction": None, "longest": []}
    by_kind: dict[str, float] = {}
    by_name: dict[str, float] = {}
    calls: dict[str, int] = {}
    for event in kernels:
        by_kind[kernel_kind(event["name"])] = by_kind.get(kernel_kind(event["name"]), 0.0) + event["dur"] / 1e6
        by_name[event["name"]] = by_name.get(event["name"], 0.0) + event["dur"] / 1e6
        calls[event["name"]] = calls.get(event["name"], 0) + 1
    start = min(e["ts"] for e in kernels)
    span_s = (max(e["ts"] + e["dur"] for e in kernels) - start) / 1e6
    busy_s = union_seconds([(e["ts"], e["ts"] + e["dur"]) for e in kernels])
    longest = sorted(by_name.items(), key=lambda item: -item[1])[:LONGEST_KEPT]
    return {"kernels": len(kernels), "kernel_s_by_kind": by_kind, "span_s": span_s, "busy_s": busy_s,
            "busy_fraction": busy_s / span_s if span_s else None,
            "longest": [{"name": name[:240], "s": seconds, "calls": calls[name], "kind": kernel_kind(name)}
                        for name, seconds in longest]}


def linear_gemm_flops(job: Any) -> float:
    """FLOPs one step's linear-layer and head GEMMs execute (Korthikanti et al.'s 2 per multiply-add):
    forward, input gradient and, for trained weights, weight gradient; a full recompute runs the
    layers' forward again. Set beside the GEMM kernels' seconds, the rate they reached in the step."""
    x = inputs_from_job(job, DEFAULT_PARAMETERS, python_floats=True)
    t = job.training
    passes = 3 if t.method == "full" else 2  # a frozen base computes no weight gradients
    layers = (passes + (t.recompute == "full")) * layer_gemm_flops_per_token(x)
    head = passes * logits_flops_per_token(x) if t.method == "full" else 2 * logits_flops_per_token(x)
    return (layers + head) * t.micro_batch * t.seq_len


class ProfilingClock:
    """The bench's clock, starting the profiler at the first mark and stopping it after the last."""

    def __init__(self, clock: Any, profiler: Any, marks: int, sync: Any) -> None:
        self.clock, self.profiler, self.marks_left, self._sync = clock, profiler, marks, sync
        self.started = False

    def mark(self) -> Any:
        if not self.started:
            self._sync()
            self.profiler.start()
            self.started = True
        event = self.clock.mark()
        self.marks_left -= 1
        if self.marks_left == 0:
            self._sync()
            self.profiler.stop()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        return self.clock.seconds(start, end)

    def sync(self) -> None:
        self.clock.sync()


def profile_job(name: str, device: str, steps: int, warmup: int, tiny: bool) -> dict[str, Any]:
    import torch

    preset, training, layers = bench_set.JOBS[name]
    job = load_job(bench_set.job_mapping(preset, training, 1, tiny, bench_set.local_gpu(device)))
    mapping, _ = scaled_mapping(job, min(layers, job.model.n_layers))
    scaled = load_job(mapping)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    profiler = torch.profiler.profile(activities=activities)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    base = CudaClock(torch) if device == "cuda" else PerfClock()
    clock = ProfilingClock(base, profiler, 4 * steps, sync)  # _step marks 4 times per timed step
    run = measure_rank(torch, scaled, device, clock, steps, warmup, None)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(path))
        summary = summarise_trace(json.loads(path.read_text()))
    step_s = sorted(times.step_s for times in run.times)[len(run.times) // 2]  # the median
    phases_s = {phase: statistics.median(getattr(times, phase) for times in run.times)
                for phase in ("forward_s", "backward_s", "optimizer_s")}
    estimated = estimate(scaled)
    x = inputs_from_job(scaled, DEFAULT_PARAMETERS, python_floats=True)
    gemm_s = summary["kernel_s_by_kind"].get("gemm", 0.0) / steps
    flops = linear_gemm_flops(scaled)
    return {"job": name, "layers": scaled.model.n_layers, "gpu": scaled.hardware.gpu.name, "steps": steps,
            "step_s_measured": step_s, "phases_s_measured": phases_s, "step_s_estimated": estimated.step_time_s,
            "estimate_breakdown_s": estimated.step_breakdown_s, "gemm_flops_per_step": flops,
            "gemm_tflops_in_step": flops / gemm_s / 1e12 if gemm_s else None,
            # the best-shape rate the estimate gives its GEMMs (peak × MAMF × sustained fraction)
            "gemm_tflops_estimated": x.gemm_peak_tflops * x.matmul_efficiency, **summary}


def print_rows(rows: list[dict[str, Any]]) -> None:
    kinds = [kind for kind, _ in KINDS] + ["other"]
    print(f"{'job':22} {'meas s':>8} {'est s':>8} {'busy':>5} " + " ".join(f"{k[:9]:>9}" for k in kinds)
          + "   (kernel s per step)   GEMM TFLOP/s in step / estimate's")
    for row in rows:
        steps = row["steps"]
        busy = "N/A" if row["busy_fraction"] is None else f"{row['busy_fraction']:.0%}"
        cells = " ".join(f"{row['kernel_s_by_kind'].get(k, 0.0) / steps:9.4f}" for k in kinds)
        rate = "N/A" if row["gemm_tflops_in_step"] is None else f"{row['gemm_tflops_in_step']:.0f}"
        print(f"{row['job']:22} {row['step_s_measured']:8.4f} {row['step_s_estimated']:8.4f} {busy:>5} {cells}"
              f"   {rate} / {row['gemm_tflops_estimated']:.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(DEFAULT_JOBS))
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when torch sees one)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--tiny", action="store_true", help="64-wide two-layer models: a CPU smoke run")
    args = parser.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    rows = []
    for name in args.only.split(","):
        print(f"[bench_profile] {name}", file=sys.stderr, flush=True)
        rows.append(profile_job(name, device, args.steps, args.warmup, args.tiny))
        if device == "cuda":
            torch.cuda.empty_cache()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "profile.json").write_text(json.dumps(rows, indent=1) + "\n")
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
