"""Megatron-Bridge's dense pre-training rows (docs/performance-summary.md, "25.11 NeMo Container":
Llama 3 8B, Llama 3 70B and Llama 3.1 405B on DGX-GB300, GB200, B200 and H100) beside trainrig's
estimate. Not bundled and fitted on nothing: a held-out look at NeMo's dense recipes.

    python benchmarks/megatron_bridge_dense_throughput.py [--recipes]

`attn` is the attention core's share of a micro-batch's estimated arithmetic.

Each row takes what the table states: model, GPUs, precision (FP8-CS = fp8 tensorwise current
scaling, FP8-MX = mxfp8; the table's parenthesized figures are the FP8-MX rows), global and
micro-batch, sequence length, FSDP (Megatron-FSDP: zero 3), TP, PP, CP and VP. What it does not
state is left to trainrig's defaults for `framework: nemo` (its recipes' distributed optimizer,
ZeRO 1; sequence parallelism with TP; its pretraining recipes' Transformer Engine cross-entropy,
`loss: fused`; the 405B's embedding and loss as pipeline slots, 126 + 2 = 128, the even split
Megatron-Core runs and Megatron-Bridge's 405B recipe sets) and to the network of the MoE script (8 × 400 Gb/s per
8-GPU node; GB300 800 Gb/s per GPU).

`--recipes` adds what Megatron-Bridge's performance scripts set for these models
(scripts/performance/configs/llama/llama3_llm_pretrain.py and llama3_workload_base_configs.py,
read at a later commit than the table, so a row's recipe may have changed since):
`set_llama3_common_configs` turns `grad_reduce_in_fp32` off (bf16 gradients:
`grad_reduce_dtype: bf16`); the 70B and 8B configs run Transformer Engine's TP overlap whenever
tp > 1 (`tp_comm_overlap`); the 8B presets on GB300, GB200 and B200 capture the whole iteration in
a CUDA graph (`cuda_graph_scope: [full_iteration]`); the 70B Megatron-FSDP presets in fp8 (V2, GBS
256) offload 20 (GB300) and 40 (GB200) layers' activations to the host (`cpu_offloading_num_layers`:
`activation_offload_layers`).
"""

from __future__ import annotations

import argparse
import statistics

from megatron_bridge_moe_throughput import system_hardware  # this directory, on the path when run as a script
from trainrig import estimate, load_job
from trainrig.estimate import core
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS

MODELS = {"LLAMA3_8B": "llama3-8b", "LLAMA3_70B": "llama3-70b", "LLAMA3.1_405B": "llama3.1-405b"}
PRECISION = {"FP8-CS": "tensorwise", "FP8-MX": "mxfp8"}
# llama3_workload_base_configs.py, LLAMA3_70B_PRETRAIN_CONFIG_{GB300,GB200}_FP8_CS_V2: cpu_offloading_num_layers
OFFLOADED_LAYERS = {"GB300": 20, "GB200": 40}
# system, model, GPUs, precision, GBS, MBS, seq, FSDP, TP, PP, CP, VP, tokens/s per GPU
ROWS = """
GB300 LLAMA3_8B 8 FP8-CS 128 2 8192 0 1 1 1 1 37556
GB300 LLAMA3_8B 8 FP8-MX 128 2 8192 0 1 1 1 1 36108
GB300 LLAMA3_70B 64 FP8-CS 256 2 8192 1 1 1 1 1 4520
GB300 LLAMA3.1_405B 256 FP8-CS 1536 1 8192 0 2 8 2 4 999
GB200 LLAMA3_8B 8 FP8-CS 128 2 8192 0 1 1 1 1 31508
GB200 LLAMA3_8B 8 FP8-MX 128 2 8192 0 1 1 1 1 29789
GB200 LLAMA3_70B 64 FP8-CS 256 2 8192 1 1 1 1 1 4312
GB200 LLAMA3.1_405B 256 FP8-CS 1536 1 8192 0 4 16 1 4 813
B200 LLAMA3_8B 8 FP8-CS 128 2 8192 0 1 1 1 1 30624
B200 LLAMA3_8B 8 FP8-MX 128 2 8192 0 1 1 1 1 29521
B200 LLAMA3.1_405B 128 FP8-CS 64 1 8192 0 4 8 2 8 661
B200 LLAMA3.1_405B 128 FP8-MX 64 1 8192 0 4 8 2 8 624
H100-SXM5-80GB LLAMA3_8B 8 FP8-CS 128 1 8192 1 1 1 1 1 14451
H100-SXM5-80GB LLAMA3_70B 64 FP8-CS 128 1 8192 0 4 8 1 5 1602
H100-SXM5-80GB LLAMA3.1_405B 1024 FP8-CS 512 1 8192 0 8 8 2 8 292
"""


def row_job(system, model, n_gpus, precision, gbs, mbs, seq, fsdp, tp, pp, cp, vp, recipes=False):
    hardware = system_hardware(system, n_gpus)
    training = {"framework": "nemo", "precision": "fp8", "fp8_recipe": PRECISION[precision], "global_batch": gbs,
                "micro_batch": mbs, "seq_len": seq, "tp": tp, "pp": pp, "cp": cp, "vpp": vp,
                "sequence_parallel": tp > 1}
    if fsdp:
        training["zero"] = 3
    if recipes:
        training.update(recipe_settings(system, model, tp, bool(fsdp)))
    return load_job({"model": MODELS[model], "hardware": hardware, "training": training})


def recipe_settings(system: str, model: str, tp: int, fsdp: bool) -> dict:
    """What the performance recipes set beyond a row's layout (see `--recipes` above): bf16
    gradients, TP overlap with tp > 1, the 8B's full-iteration CUDA graph off H100, and the 70B
    Megatron-FSDP presets' offloaded activations."""
    settings = {"grad_reduce_dtype": "bf16", "tp_comm_overlap": tp > 1}
    if model == "LLAMA3_8B" and not system.startswith("H100"):
        settings["cuda_graph_scope"] = ["full_iteration"]
    if model == "LLAMA3_70B" and fsdp and system in OFFLOADED_LAYERS:
        settings["activation_offload_layers"] = OFFLOADED_LAYERS[system]
    return settings


def attention_share(job) -> float:
    """The attention core's share of one micro-batch's arithmetic on the slowest stage (core.py)."""
    x = inputs_from_job(job, DEFAULT_PARAMETERS)
    arithmetic = core._arithmetic_s(x, DEFAULT_PARAMETERS)
    forward, backward = arithmetic["attention"]
    return float(x.layers_per_stage * (forward + backward) / arithmetic["compute"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", action="store_true", help="add the performance recipes' settings (see above)")
    args = parser.parse_args()
    errors = []
    print(f"{'system':<15}{'model':<15}{'GPUs':>5} {'prec':<7}{'layout':<22}{'measured':>9}{'estimate':>10}{'error':>8}"
          f"{'GiB':>7}{'attn':>6}")
    for line in ROWS.strip().splitlines():
        system, model, n_gpus, precision, *rest, measured = line.split()
        values = [int(v) for v in rest]
        job = row_job(system, model, int(n_gpus), precision, *values, recipes=args.recipes)
        result = estimate(job, advise_fit=False)
        error = result.tokens_per_s_per_gpu / float(measured) - 1
        errors.append(abs(error))
        fsdp, tp, pp, cp, vp = values[3:]
        layout = f"tp{tp} pp{pp} cp{cp} vp{vp}" + (" fsdp" if fsdp else "")
        fits = "" if result.fits else " (does not fit)"
        print(f"{system:<15}{model:<15}{n_gpus:>5} {precision:<7}{layout:<22}{float(measured):>9.0f}"
              f"{result.tokens_per_s_per_gpu:>10.0f}{error:>+8.1%}{result.memory_per_gpu_gib:>7.1f}"
              f"{attention_share(job):>6.0%}{fits}")
    print(f"mean absolute error {statistics.mean(errors):.1%} over {len(errors)} rows;"
          f" median {statistics.median(errors):.1%}")


if __name__ == "__main__":
    main()
