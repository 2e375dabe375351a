"""Megatron-Bridge's dense pre-training rows from every container of its performance archive
(docs/performance-summary-archive.md of NVIDIA-NeMo/Megatron-Bridge, read at 067f987: the 26.02,
26.02.01, 26.04, 26.04.01 and 26.06 containers; Llama 3 8B, Llama 3 70B and Llama 3.1 405B on
DGX-GB300, GB200 and H100) beside trainrig's estimate, each row as the table states it. Not bundled,
fitted on nothing: a held-out look at how stable the estimate is across NeMo's releases.

    python benchmarks/megatron_bridge_dense_archive.py [--recipes]

Each row takes the table's GPUs, precision (FP8: Transformer Engine's current scaling, the 25.11
table's FP8-CS; MXFP8; NVFP4: `precision: fp4`), GBS, MBS, sequence length, FSDP (> 0: Megatron-FSDP,
`zero: 3`), TP, PP, CP and VP; the rest is `framework: nemo`'s defaults and the network of
`megatron_bridge_moe_throughput.py` (8 × 400 Gb/s per 8-GPU node; GB300 800 Gb/s per GPU).

`--recipes` adds what the performance recipes set beyond the table, as
`megatron_bridge_dense_throughput.py --recipes` does (its `recipe_settings`): bf16 gradients (the
performance recipes' `_benchmark_common` sets `grad_reduce_in_fp32 = False`, perf_recipes/_common.py
at 067f987), TP overlap with tp > 1, the 8B's full-iteration CUDA graph off H100, and the 70B
Megatron-FSDP presets' offloaded activations (GB300 20 layers, GB200 40:
perf_recipes/llama/gb300/llama3.py `llama3_70b_pretrain_64gpu_gb300_fp8cs_config`,
`cpu_offloading_num_layers = 20`). The recipes are read at one commit; a container's may differ.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from megatron_bridge_dense_throughput import recipe_settings  # this directory, on the path when run as a script
from megatron_bridge_moe_throughput import system_hardware
from trainrig import estimate, load_job

MODELS = {"LLAMA3_8B": "llama3-8b", "LLAMA3_70B": "llama3-70b", "LLAMA3.1_405B": "llama3.1-405b"}
SYSTEMS = {"GB300": "GB300", "GB200": "GB200", "H100": "H100-SXM5-80GB"}
PRECISION = {"FP8": ("fp8", "tensorwise"), "MXFP8": ("fp8", "mxfp8"), "NVFP4": ("fp4", None)}
# container, system, model, GPUs, precision, GBS, MBS, seq, FSDP, TP, PP, CP, VP, tokens/s per GPU
ROWS = """
26.06 GB300 LLAMA3.1_405B 256 FP8 1536 1 8192 0 4 8 1 4 1048
26.06 GB300 LLAMA3.1_405B 256 MXFP8 1536 1 8192 0 2 8 2 4 952
26.06 GB300 LLAMA3.1_405B 256 NVFP4 1536 1 8192 0 4 8 1 4 1413
26.06 GB200 LLAMA3.1_405B 256 FP8 1536 1 8192 0 4 16 1 4 843
26.06 GB200 LLAMA3.1_405B 256 MXFP8 1536 1 8192 0 4 16 1 8 783
26.06 GB200 LLAMA3.1_405B 256 NVFP4 1536 1 8192 0 4 16 1 8 1166
26.06 H100 LLAMA3.1_405B 1024 FP8 1536 1 8192 0 8 8 2 8 326
26.04.01 GB300 LLAMA3_70B 64 FP8 256 2 8192 1 1 1 1 1 5248
26.04.01 GB300 LLAMA3_70B 64 MXFP8 256 1 8192 0 1 4 1 5 4864
26.04.01 GB300 LLAMA3_70B 64 NVFP4 256 1 8192 0 1 4 1 5 7296
26.04.01 GB200 LLAMA3_70B 64 FP8 256 2 8192 1 1 1 1 1 4224
26.04.01 GB200 LLAMA3_70B 64 MXFP8 256 1 8192 0 2 4 1 5 3712
26.04.01 GB200 LLAMA3_70B 64 NVFP4 256 1 8192 0 2 4 1 5 4864
26.04.01 H100 LLAMA3_70B 64 FP8 256 1 8192 0 4 8 1 5 1664
26.04.01 GB300 LLAMA3.1_405B 256 FP8 1536 1 8192 0 4 8 1 4 1024
26.04.01 GB300 LLAMA3.1_405B 256 MXFP8 1536 1 8192 0 2 8 2 4 960
26.04.01 GB300 LLAMA3.1_405B 256 NVFP4 1536 1 8192 0 4 8 1 4 1440
26.04.01 GB200 LLAMA3.1_405B 256 FP8 1536 1 8192 0 4 16 1 4 864
26.04.01 GB200 LLAMA3.1_405B 256 MXFP8 1536 1 8192 0 4 16 1 8 800
26.04.01 GB200 LLAMA3.1_405B 256 NVFP4 1536 1 8192 0 4 16 1 8 1184
26.04.01 H100 LLAMA3.1_405B 1024 FP8 1536 1 8192 0 8 8 2 8 328
26.04 GB300 LLAMA3_70B 64 NVFP4 256 1 8192 0 1 4 1 5 7397
26.04 GB200 LLAMA3_70B 64 NVFP4 256 1 8192 0 2 4 1 5 4898
26.04 GB300 LLAMA3_70B 64 MXFP8 256 1 8192 0 1 4 1 5 4742
26.04 GB200 LLAMA3_70B 64 MXFP8 256 1 8192 0 2 4 1 5 3828
26.04 GB300 LLAMA3_70B 64 FP8 256 2 8192 1 1 1 1 1 5243
26.04 GB200 LLAMA3_70B 64 FP8 256 2 8192 1 1 1 1 1 4143
26.04 H100 LLAMA3_70B 64 FP8 256 1 8192 0 4 8 1 5 1633
26.04 GB300 LLAMA3.1_405B 256 NVFP4 1536 1 8192 0 4 8 1 4 1424
26.04 GB200 LLAMA3.1_405B 256 NVFP4 1536 1 8192 0 4 16 1 8 1136
26.04 GB300 LLAMA3.1_405B 256 MXFP8 1536 1 8192 0 2 8 2 4 968
26.04 GB200 LLAMA3.1_405B 256 MXFP8 1536 1 8192 0 4 16 1 8 793
26.04 GB300 LLAMA3.1_405B 256 FP8 1536 1 8192 0 4 8 1 4 1036
26.04 GB200 LLAMA3.1_405B 256 FP8 1536 1 8192 0 4 16 1 4 842
26.02.01 GB300 LLAMA3_70B 64 NVFP4 256 2 8192 0 1 1 1 1 7002
26.02.01 GB200 LLAMA3_70B 64 NVFP4 256 1 8192 0 2 4 1 5 4557
26.02.01 GB300 LLAMA3_70B 64 MXFP8 256 2 8192 0 1 4 1 1 4798
26.02.01 GB200 LLAMA3_70B 64 MXFP8 256 1 8192 0 2 4 1 5 3837
26.02.01 GB300 LLAMA3_70B 64 FP8 256 2 8192 1 1 1 1 1 5243
26.02.01 GB200 LLAMA3_70B 64 FP8 256 2 8192 1 1 1 1 1 4357
26.02.01 H100 LLAMA3_70B 64 FP8 256 1 8192 0 4 8 1 5 1639
26.02.01 GB300 LLAMA3.1_405B 256 NVFP4 1536 1 8192 0 4 8 1 4 1358
26.02.01 GB200 LLAMA3.1_405B 256 NVFP4 1536 1 8192 0 4 16 1 4 1083
26.02.01 GB300 LLAMA3.1_405B 256 MXFP8 1536 1 8192 0 2 8 2 4 949
26.02.01 GB200 LLAMA3.1_405B 256 MXFP8 1536 1 8192 0 4 16 1 8 775
26.02.01 GB300 LLAMA3.1_405B 256 FP8 1536 1 8192 0 2 8 2 4 1024
26.02.01 GB200 LLAMA3.1_405B 256 FP8 1536 1 8192 0 4 16 1 4 818
26.02 GB300 LLAMA3_70B 64 NVFP4 256 1 8192 0 1 4 1 5 6798
26.02 GB200 LLAMA3_70B 64 NVFP4 256 1 8192 0 2 4 1 5 4458
26.02 GB300 LLAMA3_70B 64 MXFP8 256 1 8192 0 1 4 1 5 4596
26.02 GB200 LLAMA3_70B 64 MXFP8 256 1 8192 0 2 4 1 5 3613
26.02 GB300 LLAMA3_70B 64 FP8 256 2 8192 1 1 1 1 1 5003
26.02 GB200 LLAMA3_70B 64 FP8 256 2 8192 1 1 1 1 1 4040
26.02 H100 LLAMA3_70B 64 FP8 256 1 8192 0 4 8 1 5 1621
26.02 GB300 LLAMA3.1_405B 256 NVFP4 1536 1 8192 0 4 8 1 4 1333
26.02 GB200 LLAMA3.1_405B 256 NVFP4 1536 1 8192 0 4 16 1 8 1076
26.02 GB300 LLAMA3.1_405B 256 MXFP8 1536 1 8192 0 2 8 2 4 931
26.02 GB200 LLAMA3.1_405B 256 MXFP8 1536 1 8192 0 4 16 1 8 786
26.02 GB300 LLAMA3.1_405B 256 FP8 1536 1 8192 0 4 8 1 4 988
26.02 GB200 LLAMA3.1_405B 256 FP8 1536 1 8192 0 4 16 1 4 793
26.02 H100 LLAMA3.1_405B 1024 FP8 1536 1 8192 0 8 8 2 8 311
"""


def row_job(system, model, n_gpus, precision, gbs, mbs, seq, fsdp, tp, pp, cp, vp, recipes=False):
    kind, recipe = PRECISION[precision]
    training = {"framework": "nemo", "precision": kind, "global_batch": gbs, "micro_batch": mbs, "seq_len": seq,
                "tp": tp, "pp": pp, "cp": cp, "vpp": vp, "sequence_parallel": tp > 1}
    if recipe:
        training["fp8_recipe"] = recipe
    if fsdp:
        training["zero"] = 3
    if recipes:
        training.update(recipe_settings(system, model, tp, bool(fsdp)))
    return load_job({"model": MODELS[model], "hardware": system_hardware(SYSTEMS[system], n_gpus),
                     "training": training})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", action="store_true", help="add the performance recipes' settings (see above)")
    args = parser.parse_args()
    print(f"{'container':<10}{'system':<7}{'model':<15}{'GPUs':>5} {'prec':<6}{'layout':<24}{'measured':>9}"
          f"{'estimate':>10}{'error':>8}{'GiB':>7}")
    errors, by_system, fits_wrong = [], defaultdict(list), 0
    for line in ROWS.strip().splitlines():
        container, system, model, n_gpus, precision, *rest, measured = line.split()
        gbs, mbs, seq, fsdp, tp, pp, cp, vp = (int(v) for v in rest)
        job = row_job(system, model, int(n_gpus), precision, gbs, mbs, seq, fsdp, tp, pp, cp, vp, args.recipes)
        result = estimate(job, advise_fit=False)
        error = result.tokens_per_s_per_gpu / float(measured) - 1
        errors.append(abs(error))
        by_system[system].append(abs(error))
        layout = f"tp{tp} pp{pp} cp{cp} vp{vp}" + (" fsdp" if fsdp else "") + f" mbs{mbs}"
        fits = "" if result.fits else " (does not fit)"
        fits_wrong += not result.fits
        print(f"{container:<10}{system:<7}{model:<15}{n_gpus:>5} {precision:<6}{layout:<24}{float(measured):>9.0f}"
              f"{result.tokens_per_s_per_gpu:>10.0f}{error:>+8.1%}{result.memory_per_gpu_gib:>7.1f}{fits}")
    for system, values in by_system.items():
        print(f"{system}: mean absolute error {statistics.mean(values):.1%} over {len(values)} rows")
    print(f"mean absolute error {statistics.mean(errors):.1%} over {len(errors)} rows;"
          f" median {statistics.median(errors):.1%}; {fits_wrong} of {len(errors)} rows that ran estimated not to fit")


if __name__ == "__main__":
    main()
