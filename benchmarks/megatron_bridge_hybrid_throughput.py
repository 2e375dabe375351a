"""Megatron-Bridge's Nemotron 3 Nano pre-training rows (docs/performance-summary.md archive, "26.06
NeMo Container", Pre-Training Performance) beside trainrig's estimate: a hybrid of 23 Mamba-2, 23
MoE and 6 attention layers, fitted on nothing, a held-out look at the hybrid-layer terms.

    python benchmarks/megatron_bridge_hybrid_throughput.py

The model is NVIDIA-Nemotron-3-Nano-30B-A3B's Hugging Face config.json (model_type nemotron_h;
hybrid_override_pattern, 128 routed experts of 1856 with 6 per token and one shared expert of 3712,
64 Mamba heads of 64, 8 groups of state 128, 32 attention heads of 128 with 2 KV heads). Each row
takes what the table states: GPUs, precision (MXFP8 = mxfp8; FP8 on H100 taken as tensorwise current
scaling, the recipes' H100 default), global and micro-batch, sequence length, TP, PP, CP, EP. The
rest is trainrig's `framework: nemo` default, as in megatron_bridge_moe_throughput.py (whose DGX
systems and networks this reuses).

Below them, the dense hybrid Nemotron-H 56B on H100 (NVIDIA/dgxc-benchmarking v25.05,
nemotronh/README.md, "Expected Performance": seconds per step on 32 to 2,048 GPUs, weak-scaled at
3 sequences per GPU, FP8, TP 8, MBS 1, sequence 8192, NeMo 25.04.01). Tokens/s per GPU is
8192 · GBS / step / GPUs. The shape is the `nemotron-h-56b` preset, NeMo's NemotronHConfig56B
(118 layers, 54 Mamba-2 mixers of 256 heads of 64 with 8 groups of state 256, 10 attention layers
of 64 heads with 8 KV heads, 54 squared-ReLU MLPs of 32768; trainrig counts 56.32B parameters,
NVIDIA quotes 56B). What the README
does not state is taken from NeMo's nemotronh_56b recipe: sequence parallel and TP communication
overlap on, fp8 current scaling (bf16_with_fp8_mixed_current_scaling).
"""

from __future__ import annotations

import statistics

from megatron_bridge_moe_throughput import system_hardware
from trainrig import estimate, load_job

NEMOTRON_3_NANO = {
    "name": "nemotron-3-nano-30b-a3b", "n_layers": 52, "hidden": 2688, "n_heads": 32, "n_kv_heads": 2,
    "head_dim": 128, "ffn_hidden": 1856, "vocab": 131072, "gated_mlp": False, "position_embedding": "none",
    "layer_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "mamba_heads": 64,
    "mamba_head_dim": 64, "mamba_state_dim": 128, "mamba_groups": 8, "mamba_conv_kernel": 4, "mamba_chunk_size": 128,
    "n_experts": 128, "top_k": 6, "expert_ffn_hidden": 1856, "n_shared_experts": 1, "shared_ffn_hidden": 3712,
}
MODELS = {"Nano": NEMOTRON_3_NANO, "H-56B": "nemotron-h-56b"}  # the 56B: the catalog preset
PRECISION = {"MXFP8": ("fp8", "mxfp8"), "FP8": ("fp8", "tensorwise")}
# model, system, GPUs, precision, GBS, MBS, seq, TP, PP, CP, EP, tokens/s per GPU: Nano's from the 26.06
# NeMo Container table; the 56B's from dgxc-benchmarking's step times, 8192 · GBS / step / GPUs
# (15.119, 15.058, 15.496, 15.892, 15.586, 15.678, 15.723 s)
ROWS = """
Nano GB300 8 MXFP8 512 4 8192 1 1 1 8 39749
Nano GB200 8 MXFP8 512 2 8192 1 1 1 8 33522
Nano B300 8 MXFP8 512 4 8192 1 1 1 8 37316
Nano H100-SXM5-80GB 16 FP8 1024 1 8192 1 1 1 8 14719
H-56B H100-SXM5-80GB 32 FP8 96 1 8192 8 1 1 1 1626
H-56B H100-SXM5-80GB 64 FP8 192 1 8192 8 1 1 1 1632
H-56B H100-SXM5-80GB 128 FP8 384 1 8192 8 1 1 1 1586
H-56B H100-SXM5-80GB 256 FP8 768 1 8192 8 1 1 1 1546
H-56B H100-SXM5-80GB 512 FP8 1536 1 8192 8 1 1 1 1577
H-56B H100-SXM5-80GB 1024 FP8 3072 1 8192 8 1 1 1 1568
H-56B H100-SXM5-80GB 2048 FP8 6144 1 8192 8 1 1 1 1563
"""


def row_job(model, system, n_gpus, precision, gbs, mbs, seq, tp, pp, cp, ep):
    kind, recipe = PRECISION[precision]
    training = {"framework": "nemo", "precision": kind, "fp8_recipe": recipe, "global_batch": gbs, "micro_batch": mbs,
                "seq_len": seq, "tp": tp, "pp": pp, "cp": cp, "ep": ep, "sequence_parallel": tp > 1,
                "tp_comm_overlap": tp > 1}
    return load_job({"model": MODELS[model], "hardware": system_hardware(system, n_gpus), "training": training})


def main() -> None:
    errors = {model: [] for model in MODELS}
    print(f"{'model':<7}{'system':<16}{'GPUs':>5} {'prec':<7}{'layout':<18}{'measured':>9}{'estimate':>10}{'error':>8}"
          f"{'GiB':>7}")
    for line in ROWS.strip().splitlines():
        model, system, n_gpus, precision, *numbers, measured = line.split()
        values = [int(v) for v in numbers]
        result = estimate(row_job(model, system, int(n_gpus), precision, *values), advise_fit=False)
        error = result.tokens_per_s_per_gpu / float(measured) - 1
        errors[model].append(abs(error))
        tp, pp, cp, ep = values[3:]
        layout = f"tp{tp} pp{pp} cp{cp} ep{ep}"
        print(f"{model:<7}{system:<16}{n_gpus:>5} {precision:<7}{layout:<18}{float(measured):>9.0f}"
              f"{result.tokens_per_s_per_gpu:>10.0f}{error:>+8.1%}{result.memory_per_gpu_gib:>7.1f}"
              + ("" if result.fits else " (does not fit)"))
    for model, model_errors in errors.items():
        print(f"{model}: mean |error| {statistics.mean(model_errors):.1%} over {len(model_errors)} rows")


if __name__ == "__main__":
    main()
