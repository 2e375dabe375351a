"""`trainrig bench` over a fixed set of small jobs: measured beside estimated for each, one table.

    python benchmarks/bench_set.py [--device cuda] [--steps 5] [--warmup 2] [--time-limit-s 150]
                                   [--only NAME,...] [--out DIR] [--tiny]

The set covers what the estimate must get right on one GPU: a dense GQA model (Llama 3 8B) with and
without full recompute, a GPT-style model (LayerNorm, learned positions, biases), Q/K/V biases
(Qwen2.5), pure bf16 weights without an fp32 master copy, fp8 linears, LoRA, QLoRA with
bitsandbytes' paged 8-bit AdamW, and a mixture of experts (Mixtral); plus a data-parallel FSDP
run over every GPU when there are several. Each job is cut to a few layers (`layers`), so the whole
set fits a short GPU session; the jobs run one after another in this process and stop starting new
ones past `--time-limit-s`.

`--tiny` swaps every model for a 64-wide two-layer model of the same family, for a smoke run on a
CPU (its figures mean nothing). With `--out DIR` each run is saved in the measured-run format under
DIR/runs (`trainrig validate DIR/runs` scores them) and the table as DIR/bench_set.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from trainrig import load_job
from trainrig.bench.run import gpu_catalog_id, run_bench
from trainrig.catalog.models import load_model
from trainrig.errors import TrainrigError

# Estimated for the GPU the set runs on, so the errors compare one machine with itself; this one when
# the catalog does not know the GPU, or on the CPU
FALLBACK_GPU = "H100-SXM5-80GB"
BASE = {"seq_len": 4096, "micro_batch": 1, "global_batch": 1, "precision": "bf16"}
# name → (model preset, training fields over BASE, layers built)
JOBS: dict[str, tuple[str, dict[str, Any], int]] = {
    "llama3-8b": ("llama3-8b", {}, 4),
    "llama3-8b-recompute": ("llama3-8b", {"recompute": "full", "micro_batch": 2, "global_batch": 2}, 4),
    "llama3-8b-pure-bf16": ("llama3-8b", {"master_weights": False}, 4),
    "llama3-8b-fp8": ("llama3-8b", {"precision": "fp8"}, 4),
    "llama3-8b-lora": ("llama3-8b", {"method": "lora", "lora_rank": 16, "lora_targets": "all-linear"}, 4),
    "llama3-8b-qlora": ("llama3-8b", {"method": "qlora", "lora_rank": 16, "lora_targets": "all-linear",
                                      "optimizer": "paged_adamw8bit"}, 4),
    "gpt3-1.3b": ("gpt3-1.3b", {"seq_len": 2048, "micro_batch": 4, "global_batch": 4}, 6),
    "qwen2.5-7b": ("qwen2.5-7b", {}, 4),
    "mixtral-8x7b": ("mixtral-8x7b", {"seq_len": 2048}, 2),
}
DATA_PARALLEL = ("llama3-8b-fsdp", "llama3-8b", {"zero": 3}, 4)
TINY_SHAPE = {"hidden": 64, "n_heads": 4, "head_dim": None, "ffn_hidden": 172, "vocab": 256, "n_layers": 2,
              "max_positions": 64, "expert_ffn_hidden": None, "shared_ffn_hidden": None}


def job_mapping(preset: str, training: dict[str, Any], n_gpus: int, tiny: bool, gpu: str = FALLBACK_GPU
                ) -> dict[str, Any]:
    model: str | dict[str, Any] = preset
    fields = {**BASE, **training}
    if tiny:  # the family's flags on a 64-wide model; sequences fit the tiny position table
        spec = load_model(preset).model_dump()
        kv = spec.get("n_kv_heads") and min(spec["n_kv_heads"], 2)
        model = {**spec, **TINY_SHAPE, "n_kv_heads": kv, "n_experts": min(spec["n_experts"], 4),
                 "top_k": min(spec["top_k"], 2), "sliding_window": None}
        fields["seq_len"] = 32
    dp = fields.get("micro_batch", 1) * n_gpus
    return {"model": model, "hardware": {"gpu": gpu, "n_gpus": n_gpus},
            "training": {**fields, "global_batch": dp}}


def local_gpu(device: str) -> str:
    """The catalog id of the GPU the set runs on (FALLBACK_GPU on the CPU or for an unknown GPU)."""
    if device != "cuda":
        return FALLBACK_GPU
    import torch

    return gpu_catalog_id(torch) or FALLBACK_GPU


def gpu_count(device: str) -> int:
    import torch

    return torch.cuda.device_count() if device == "cuda" else 1


def jobs_to_run(device: str, only: set[str] | None) -> list[tuple[str, str, dict[str, Any], int, int]]:
    chosen = [(name, preset, training, layers, 1) for name, (preset, training, layers) in JOBS.items()]
    gpus = gpu_count(device)
    if gpus > 1:
        name, preset, training, layers = DATA_PARALLEL
        chosen.append((name, preset, training, layers, gpus))
    return [job for job in chosen if only is None or job[0] in only]


def bench_one(name: str, mapping: dict[str, Any], layers: int, n_gpus: int, args: argparse.Namespace
              ) -> dict[str, Any]:
    """One job's row: measured and estimated figures and errors, or why it did not run."""
    job = load_job(mapping)
    layers = min(layers, job.model.n_layers)
    try:
        result, scaled = run_bench(job, layers=layers, steps=args.steps, warmup=args.warmup, device=args.device,
                                   gpus=n_gpus)
    except TrainrigError as error:
        return {"job": name, "skipped": str(error)}
    if args.out is not None:
        run = result.measured_run(scaled, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        (args.out / "runs" / f"{name}.json").write_text(json.dumps(run, indent=1) + "\n")
    row = {"job": name, "layers": result.n_layers, "gpus": result.n_gpus, "oom": result.oom_message}
    if result.measured is not None:
        for key in ("step_time_s", "peak_allocated_gib", "peak_reserved_gib"):
            row[key] = {"measured": getattr(result.measured, key), "estimated": result.estimated[key],
                        "error_pct": result.error_pct.get(key)}
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    def cell(row: dict[str, Any], key: str) -> str:
        figure = row.get(key)
        if not figure or figure["measured"] is None:
            return "N/A"
        error = figure["error_pct"]
        return f"{figure['measured']:.4g} vs {figure['estimated']:.4g} ({error:+.1f}%)"

    print(f"{'job':24} {'step time s: measured vs est':34} {'peak allocated GiB':34} {'peak reserved GiB':34}")
    for row in rows:
        if "skipped" in row or row.get("oom"):
            print(f"{row['job']:24} {row.get('skipped') or row['oom']}")
            continue
        print(f"{row['job']:24} {cell(row, 'step_time_s'):34} {cell(row, 'peak_allocated_gib'):34}"
              f" {cell(row, 'peak_reserved_gib'):34}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when torch sees one)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--time-limit-s", type=float, default=150.0, help="start no job after this long")
    parser.add_argument("--only", default=None, help="comma-separated job names")
    parser.add_argument("--out", type=Path, default=None, help="folder for the saved runs and bench_set.json")
    parser.add_argument("--tiny", action="store_true", help="64-wide two-layer models: a CPU smoke run")
    args = parser.parse_args()
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.out is not None:
        (args.out / "runs").mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    started_s, rows, gpu = time.monotonic(), [], local_gpu(args.device)
    for name, preset, training, layers, n_gpus in jobs_to_run(args.device, only):
        if time.monotonic() - started_s > args.time_limit_s:
            rows.append({"job": name, "skipped": f"not started: past the {args.time_limit_s:.0f} s limit"})
            continue
        print(f"[bench_set] {name} ({n_gpus} GPU{'s' if n_gpus > 1 else ''})", file=sys.stderr, flush=True)
        rows.append(bench_one(name, job_mapping(preset, training, n_gpus, args.tiny, gpu), layers, n_gpus, args))
    if args.out is not None:
        (args.out / "bench_set.json").write_text(json.dumps(rows, indent=1) + "\n")
    print_table(rows)
    # a job skipped for what this machine lacks (bitsandbytes, fp8, the time limit) is reported, not failed
    ran = [r for r in rows if "skipped" not in r]
    return 0 if ran and not any(r.get("oom") for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
