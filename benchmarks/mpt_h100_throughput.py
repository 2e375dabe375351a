"""MosaicML's MPT throughput on 8–64 H100-80GB (llm-foundry scripts/train/benchmarking/README.md, the
"H100 80GB BF16" and "H100 80GB FP8" tables) beside trainrig's estimate. Not bundled: a held-out
look at the A100 rows' annotations on another GPU.

    python benchmarks/mpt_h100_throughput.py              # as the bundled MPT rows: FlashAttention-1 class
    python benchmarks/mpt_h100_throughput.py --no-annotation   # flash attention with no version (FA2 default)

Each row copies the bundled A100-80GB case of the same model (its shape, FSDP full shard, the
fused loss) and changes what the H100 table states: GPU count, sequence length, micro-batch,
global batch, activation checkpointing (full or none) and precision (amp_bf16, amp_fp8). Multi-node
rows get 8 × 400 Gb/s per node, which the README does not state.
"""

from __future__ import annotations

import argparse
import copy
import statistics

from trainrig import estimate, load_job
from trainrig.catalog.cases import load_cases

# model, seq_len, GPUs, micro-batch, global batch, activation checkpointing, tokens/s per GPU, precision
ROWS = """
70b 2048 64 8 2048 1 1039 bf16
70b 2048 32 2 1024 1 882 bf16
30b 8192 8 1 168 1 1384 bf16
30b 4096 8 1 168 1 1802 bf16
30b 2048 8 3 504 1 2002 bf16
30b 1024 8 6 1008 1 2084 bf16
13b 32768 8 1 24 1 1976 bf16
13b 16384 8 3 72 1 2985 bf16
13b 4096 8 10 240 1 4717 bf16
13b 2048 8 2 16 0 4792 bf16
13b 1024 8 40 960 1 5502 bf16
7b 65536 8 1 16 1 1956 bf16
7b 8192 8 8 128 1 6935 bf16
7b 4096 8 16 256 1 8611 bf16
7b 2048 8 6 48 0 10643 bf16
7b 1024 8 64 1024 1 10203 bf16
3b 16384 8 1 48 0 11152 bf16
3b 8192 8 3 144 0 16578 bf16
3b 4096 8 5 240 0 20964 bf16
3b 1024 8 20 960 0 27046 bf16
3b 512 8 40 1920 0 27965 bf16
1b 32768 8 1 32 0 12025 bf16
1b 8192 8 3 96 0 29157 bf16
1b 2048 8 14 112 0 45455 bf16
1b 1024 8 18 576 0 48910 bf16
1b 512 8 56 1792 0 52275 bf16
760m 8192 8 6 96 0 41825 bf16
760m 2048 8 24 384 0 63147 bf16
760m 1024 8 48 768 0 78581 bf16
760m 512 8 96 1536 0 83749 bf16
3b 8192 8 3 144 0 19146 fp8
3b 2048 8 10 480 0 30586 fp8
3b 512 8 40 1920 0 36527 fp8
1b 8192 8 2 64 0 32010 fp8
1b 512 8 56 1792 0 70315 fp8
350m 512 8 56 1792 0 154420 fp8
"""


def h100_job(a100_job, n_gpus, seq_len, micro_batch, global_batch, recompute, precision, annotated):
    mapping = {"model": a100_job.model.model_dump(mode="json", exclude_defaults=True),
               "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": n_gpus, "gpus_per_node": 8, "intra_node": "nvlink4"},
               "training": copy.deepcopy(a100_job.training.model_dump(mode="json", exclude_defaults=True))}
    if n_gpus > 8:
        mapping["hardware"]["inter_node"] = {"bandwidth_gbps": 400, "ports_per_node": 8}
    training = mapping["training"]
    for field in ("dp", "grad_accum"):
        training.pop(field, None)
    training.update(seq_len=seq_len, micro_batch=micro_batch, global_batch=global_batch, precision=precision,
                    recompute="full" if recompute else "none")
    if not annotated:
        training.pop("flash_attention_version", None)
    return load_job(mapping)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-annotation", action="store_true",
                        help="drop the bundled MPT rows' flash_attention_version: 1")
    args = parser.parse_args()
    a100 = {case.id.split("_")[2]: case.job for case in load_cases() if case.id.startswith("mpt_a100-80_")}
    errors = []
    print(f"{'model':5s} {'seq':>6s} {'GPUs':>4s} {'mb':>3s} {'AC':>3s} {'prec':4s} {'measured':>8s} {'estimate':>8s}"
          f" {'error':>7s}")
    for line in ROWS.split("\n"):
        if not line:
            continue
        model, seq, gpus, mb, gb, ac, tokens, precision = line.split()
        job = h100_job(a100[model], int(gpus), int(seq), int(mb), int(gb), ac == "1", precision,
                       not args.no_annotation)
        predicted = estimate(job, advise_fit=False).tokens_per_s_per_gpu
        error = (predicted - float(tokens)) / float(tokens) * 100
        errors.append(abs(error))
        print(f"{model:5s} {seq:>6s} {gpus:>4s} {mb:>3s} {ac:>3s} {precision:4s} {float(tokens):8.0f} {predicted:8.0f}"
              f" {error:+6.1f}%")
    print(f"mean absolute error {statistics.mean(errors):.1f}% over {len(errors)} rows")


if __name__ == "__main__":
    main()
