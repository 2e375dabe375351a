"""Megatron-Bridge's MoE pre-training rows (docs/performance-summary.md, "25.11 NeMo Container":
DeepSeek-V3, Qwen3-30B-A3B, Qwen3-235B-A22B and GPT-OSS 120B on DGX-GB300, GB200, B200 and H100)
beside trainrig's estimate. Not bundled and fitted on nothing: a held-out look at the layouts the
latent-attention, folded expert-parallel and windowed-layer terms made expressible.

    python benchmarks/megatron_bridge_moe_throughput.py

Each row takes what the table states: model, GPUs, precision (BF16; FP8-MX = mxfp8; FP8-CS =
tensorwise current scaling), global and micro-batch, sequence length, TP, PP, CP, VP and EP. What
it does not state is left to trainrig's defaults for `framework: nemo` (Megatron-Bridge: its
recipes' distributed optimizer, ZeRO 1) and named here: no recompute (but see RECOMPUTE), no MTP module, no CUDA graphs
or all-to-all overlap (the recipes may run them), the network (8 × 400 Gb/s NDR per 8-GPU node;
GB300 800 Gb/s XDR per GPU) and, for an EP larger than dp·cp, the experts without tensor
parallelism (the estimate names that assumption). The table's H100 Qwen3-235B row lacks a column
and is left out.
"""

from __future__ import annotations

import argparse
import statistics

from trainrig import estimate, load_job

# Hugging Face config.json shapes (Qwen/Qwen3-30B-A3B and Qwen/Qwen3-235B-A22B)
QWEN3_30B = {"name": "qwen3-30b-a3b", "n_layers": 48, "hidden": 2048, "n_heads": 32, "n_kv_heads": 4, "head_dim": 128,
             "ffn_hidden": 6144, "vocab": 151936, "n_experts": 128, "top_k": 8, "expert_ffn_hidden": 768}
QWEN3_235B = {"name": "qwen3-235b-a22b", "n_layers": 94, "hidden": 4096, "n_heads": 64, "n_kv_heads": 4,
              "head_dim": 128, "ffn_hidden": 12288, "vocab": 151936, "n_experts": 128, "top_k": 8,
              "expert_ffn_hidden": 1536}
MODELS = {"DeepSeekV3": "deepseek-v3", "GPT_OSS_120B": "gpt-oss-120b", "Qwen3_30B_a3B": QWEN3_30B,
          "Qwen3_235B_a22B": QWEN3_235B}
PRECISION = {"BF16": ("bf16", None), "FP8-MX": ("fp8", "mxfp8"), "FP8-CS": ("fp8", "tensorwise")}
# Megatron-Bridge's performance recipes (scripts/performance/configs/deepseek/deepseek_workload_base_configs.py)
# list `recompute_modules` per system and precision; applied where that file's layout (pp, vp, ep)
# is the table's row, as `--recompute` runs them: (system, model, precision) → modules.
# The DeepSeek recipes' precision-aware optimizer: AdamW's moments in bf16 (`exp_avg_dtype`,
# `exp_avg_sq_dtype`; Megatron-Bridge scripts/performance `_enable_deepseek_precision_aware_optimizer`,
# "the optimizer precision settings used by tuned DeepSeek recipes"), run with --bf16-moments.
BF16_MOMENTS = ("DeepSeekV3",)
RECOMPUTE = {("GB200", "DeepSeekV3", "BF16"): ["mla_up_proj"], ("B200", "DeepSeekV3", "FP8-MX"): ["mla_up_proj"]}
# system, model, GPUs, precision, GBS, MBS, seq, TP, PP, CP, VP, EP, tokens/s per GPU
ROWS = """
GB300 DeepSeekV3 256 BF16 4096 1 4096 1 2 1 4 32 3848
GB300 DeepSeekV3 256 FP8-MX 4096 1 4096 1 2 1 4 32 4357
GB300 GPT_OSS_120B 64 BF16 1280 2 8192 1 1 1 1 64 18347
GB300 Qwen3_30B_a3B 8 FP8-MX 512 4 4096 1 1 1 1 8 28934
GB300 Qwen3_235B_a22B 256 BF16 8192 2 4096 1 4 1 12 16 6131
GB200 DeepSeekV3 256 BF16 4096 1 4096 1 4 1 4 64 3139
GB200 DeepSeekV3 256 FP8-MX 4096 1 4096 1 8 1 4 32 4018
GB200 GPT_OSS_120B 64 BF16 1280 1 8192 1 1 1 1 64 15876
GB200 Qwen3_30B_a3B 8 FP8-MX 512 4 4096 1 1 1 1 8 23766
GB200 Qwen3_235B_a22B 256 BF16 8192 1 4096 1 8 1 3 32 4916
B200 DeepSeekV3 256 FP8-MX 2048 1 4096 1 16 1 1 8 2139
B200 GPT_OSS_120B 64 BF16 512 4 4096 1 1 1 1 8 8213
B200 Qwen3_30B_a3B 8 FP8-MX 512 1 4096 1 1 1 1 8 9299
B200 Qwen3_235B_a22B 64 FP8-MX 1024 1 4096 1 8 1 2 8 3269
H100-SXM5-80GB GPT_OSS_120B 64 BF16 512 4 4096 1 4 1 1 8 5630
H100-SXM5-80GB Qwen3_30B_a3B 16 FP8-CS 512 2 4096 1 2 1 24 8 5275
"""


def system_hardware(system, n_gpus):
    """The job's hardware section for one of the tables' DGX systems."""
    gpus_per_node = 4 if system.startswith("GB") else 8  # NVL72 trays of 4, DGX nodes of 8
    network = {"bandwidth_gbps": 800, "ports_per_node": 4} if system == "GB300" else {
        "bandwidth_gbps": 400, "ports_per_node": gpus_per_node}
    hardware = {"gpu": system, "n_gpus": n_gpus, "gpus_per_node": gpus_per_node}
    if n_gpus > gpus_per_node:
        hardware["inter_node"] = network
    return hardware


def row_job(system, model, n_gpus, precision, gbs, mbs, seq, tp, pp, cp, vp, ep, recompute_modules=None,
            bf16_moments=False, graph_scope=None):
    hardware = system_hardware(system, n_gpus)
    kind, recipe = PRECISION[precision]
    training = {"framework": "nemo", "precision": kind, "global_batch": gbs, "micro_batch": mbs, "seq_len": seq,
                "tp": tp, "pp": pp, "cp": cp, "vpp": vp, "ep": ep, "sequence_parallel": tp > 1}
    if recipe:
        training["fp8_recipe"] = recipe
    if recompute_modules:
        training["recompute_modules"] = recompute_modules
    if bf16_moments:
        training["optimizer_moment_dtype"] = "bf16"
    if graph_scope:
        training["cuda_graph_scope"] = graph_scope
    return load_job({"model": MODELS[model], "hardware": hardware, "training": training})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recompute", action="store_true",
                        help="run the recipes' recompute_modules where their layout is the row's (RECOMPUTE)")
    parser.add_argument("--bf16-moments", action="store_true",
                        help="the DeepSeek recipes' bf16 optimizer moments on their rows (BF16_MOMENTS)")
    parser.add_argument("--graph-scope", help="CUDA graph scopes for every row, comma-separated (e.g."
                        " attn,moe_router,moe_preprocess, which most of these recipes list)")
    args = parser.parse_args()
    scope = args.graph_scope.split(",") if args.graph_scope else None
    errors = []
    print(f"{'system':<15}{'model':<17}{'GPUs':>5} {'prec':<7}{'layout':<22}{'measured':>9}{'estimate':>10}{'error':>8}"
          f"{'GiB':>7}")
    for line in ROWS.strip().splitlines():
        system, model, *numbers, measured = line.split()
        n_gpus, precision, *rest = numbers[0], numbers[1], *numbers[2:]
        values = [int(v) for v in rest]
        modules = RECOMPUTE.get((system, model, precision)) if args.recompute else None
        moments = args.bf16_moments and model in BF16_MOMENTS
        job = row_job(system, model, int(n_gpus), precision, *values, recompute_modules=modules, bf16_moments=moments,
                      graph_scope=scope)
        result = estimate(job, advise_fit=False)
        error = result.tokens_per_s_per_gpu / float(measured) - 1
        errors.append(abs(error))
        tp, pp, cp, vp, ep = values[3:]
        layout = f"tp{tp} pp{pp} cp{cp} vp{vp} ep{ep}" + ("*" if modules else "") + ("†" if moments else "")
        fits = "" if result.fits else " (does not fit)"
        print(f"{system:<15}{model:<17}{n_gpus:>5} {precision:<7}{layout:<22}{float(measured):>9.0f}"
              f"{result.tokens_per_s_per_gpu:>10.0f}{error:>+8.1%}{result.memory_per_gpu_gib:>7.1f}{fits}")
    if args.recompute:
        print("* with the recipe's recompute_modules (RECOMPUTE)")
    if args.bf16_moments:
        print("† with bf16 optimizer moments (BF16_MOMENTS)")
    print(f"mean absolute error {statistics.mean(errors):.1%} over {len(errors)} rows;"
          f" median {statistics.median(errors):.1%}")


if __name__ == "__main__":
    main()
