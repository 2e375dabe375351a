"""NeMo AutoModel's published throughput (NVIDIA-NeMo/Automodel docs/performance-summary.md: pre-training
and LoRA fine-tuning on DGX-H100, BF16) beside trainrig's estimate. Not bundled and fitted on nothing: a
held-out look at a PyTorch-native stack (FSDP2, Hugging Face or AutoModel's own model code, Transformer
Engine layers) on 1 to 1,024 GPUs.

    python benchmarks/automodel_throughput.py
    python benchmarks/automodel_throughput.py --framework custom   # the same jobs with no stack facts
    python benchmarks/automodel_throughput.py sustained_matmul_fraction=1.0   # a model parameter changed

The table's tokens/s per GPU is GBS × seq_len / step time / GPUs: its LoRA rows are run through
nemo_automodel/recipes/llm/benchmark.py (tests/functional_tests/hf_transformer_finetune/
L2_HF_Transformer_PEFT_Benchmark_Llama_custom.sh), which sets the mock dataset's batch size to the
local batch size (benchmark.py, "Inject batch_size from step_scheduler"), and 32 · 4096 / 10.51 s /
1 GPU = 12,471 against the table's 12,472.87. Each row takes what the table states (GPUs, GBS, MBS,
sequence length, TP, PP, CP, EP, VP) and, from the recipe YAML at the commit that published the row,
what it leaves out: activation checkpointing, sequence parallelism, async TP, torch.compile, the
attention kernel, the MoE dispatcher, LoRA's rank, targets and dropout. LoRA rows are the table's
rows at the commit named; older rows with another layout are kept beside the newer ones. Unstated and
named here: 8 × 400 Gb/s InfiniBand per node; FlashAttention-2 where the recipe leaves the attention
to AutoModel's default (`flash_attention_2` when flash_attn imports, nemo_automodel/_transformers/
kernel_patches.py) and for GPT-OSS's FlexAttention, which has no kernel of its own here; the fused
attention of Transformer Engine (`attn: te`) as cuDNN's; no fp8 (none of these recipes has an fp8
section); FSDP2's reduce-scatter in bf16 (the recipes' MixedPrecisionPolicy reduces in fp32, which
the format does not take with bf16 parameters). Left out: Nemotron 3 Super and Ultra, whose shapes are
not at hand here.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

from megatron_bridge_hybrid_throughput import NEMOTRON_3_NANO
from megatron_bridge_moe_throughput import QWEN3_30B
from parameter_sensitivity import parse_overrides
from trainrig import estimate, load_job
from trainrig.catalog.models import load_model
from trainrig.estimate.params import DEFAULT_PARAMETERS

# moonshotai/Kimi-K2-Base model card, "Model Summary": 61 layers of which 1 dense, attention hidden 7168,
# 64 heads, MLA, 384 experts of 2048 (8 per token) and 1 shared, vocabulary 160K (163,840 in its
# config.json); the latent-attention widths and the dense FFN as DeepSeek-V3's, whose architecture it
# keeps (the Kimi-K2 report, "Model Architecture": fewer heads, more experts, one dense layer)
KIMI_K2 = {"name": "kimi-k2", "n_layers": 61, "hidden": 7168, "n_heads": 64, "head_dim": 192, "v_head_dim": 128,
           "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "ffn_hidden": 18432, "vocab": 163840,
           "n_experts": 384, "top_k": 8, "expert_ffn_hidden": 2048, "n_shared_experts": 1, "n_dense_layers": 1}
LORA_ALL = {"method": "lora", "lora_rank": 16, "lora_targets": ["q", "k", "v", "o", "gate", "up", "down"]}
# the 70B and 32B LoRA recipes at 2013a4dd6 (examples/llm_finetune/llama3_3/
# custom_llama3_3_70b_instruct_peft_benchmark.yaml, qwen/custom_qwen2_5_32b_peft_benchmark.yaml):
# sequence parallel, activation checkpointing, async TP, FSDP2 prefetch, torch.compile
TP_LORA = {**LORA_ALL, "sequence_parallel": True, "recompute": "full", "tp_comm_overlap": True,
           "fused_kernels": True, "compile": True}
# the same recipes at 822effa16: pipeline stages of 2 layers (interleaved 1F1B), pp micro-batch 1,
# activation checkpointing, no sequence parallelism, no compile
PP_LORA = {**LORA_ALL, "recompute": "full", "pp_schedule": "1f1b", "compile": False}
# the MoE pre-training recipes (examples/benchmark/configs/*_te_deepep.yaml at 89e3a9fdd): Transformer
# Engine attention, linears and norms, grouped-GEMM experts, DeepEP, a fake balanced gate
MOE_TE = {"attention_kernel": "cudnn", "moe_dispatcher": "deepep", "fused_kernels": True}

# (name, commit, model, GPUs, training, measured tokens/s per GPU)
ROWS = [
    ("Llama 3.1 8B LoRA", "507bfb751", "llama3.1-8b", 1,
     {**LORA_ALL, "global_batch": 32, "micro_batch": 2, "seq_len": 4096, "lora_dropout": 0.1}, 12472.87),
    ("Qwen2.5 7B LoRA", "507bfb751", "qwen2.5-7b", 1,
     {**LORA_ALL, "global_batch": 32, "micro_batch": 2, "seq_len": 4096}, 14110.05),
    ("Llama 3.3 70B LoRA tp2", "2013a4dd6", "llama3-70b", 8,
     {**TP_LORA, "global_batch": 32, "micro_batch": 2, "seq_len": 4096, "tp": 2}, 1091.85),
    ("Qwen2.5 32B LoRA tp2", "2013a4dd6", "qwen2.5-32b", 8,
     {**TP_LORA, "global_batch": 32, "micro_batch": 2, "seq_len": 4096, "tp": 2}, 2250.31),
    ("Llama 3.3 70B LoRA tp2, 2 nodes", "2013a4dd6", "llama3-70b", 16,
     {**TP_LORA, "global_batch": 32, "micro_batch": 2, "seq_len": 4096, "tp": 2}, 984.85),
    ("Qwen2.5 32B LoRA tp2, 2 nodes", "2013a4dd6", "qwen2.5-32b", 16,
     {**TP_LORA, "global_batch": 32, "micro_batch": 2, "seq_len": 4096, "tp": 2}, 2072.89),
    ("Llama 3.3 70B LoRA tp2 pp4 vp10", "822effa16", "llama3-70b", 8,
     {**PP_LORA, "global_batch": 32, "micro_batch": 1, "seq_len": 4096, "tp": 2, "pp": 4, "vpp": 10,
      "pp_local_batch": 4}, 658.62),
    ("Qwen2.5 32B LoRA pp4 vp8", "507bfb751", "qwen2.5-32b", 8,
     {**PP_LORA, "global_batch": 32, "micro_batch": 1, "seq_len": 4096, "pp": 4, "vpp": 8,
      "pp_local_batch": 8}, 1950.93),
    ("Llama 3.3 70B LoRA tp2 pp4 vp10, 2 nodes", "822effa16", "llama3-70b", 16,
     {**PP_LORA, "global_batch": 32, "micro_batch": 1, "seq_len": 4096, "tp": 2, "pp": 4, "vpp": 10,
      "pp_local_batch": 4}, 680.74),
    ("Qwen2.5 32B LoRA pp4 vp8, 2 nodes", "507bfb751", "qwen2.5-32b", 16,
     {**PP_LORA, "global_batch": 32, "micro_batch": 1, "seq_len": 4096, "pp": 4, "vpp": 8,
      "pp_local_batch": 8}, 1826.49),
    # examples/llm_benchmark/llama3_3/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml at 2013a4dd6:
    # SDPA under context parallelism (all-gather rotation), activation checkpointing, compile, FSDP2 over
    # all 64 ranks with prefetch
    ("Llama 3.1 70B pre-train cp2", "2013a4dd6", "llama3.1-70b", 64,
     {"global_batch": 128, "micro_batch": 1, "seq_len": 8192, "cp": 2, "cp_kind": "all-gather", "recompute": "full",
      "fused_kernels": True, "compile": True, "attention_kernel": "fa2"}, 866.77),
    ("Qwen3 30B-A3B pre-train", "8d9bfb90e", QWEN3_30B, 8,
     {**MOE_TE, "global_batch": 512, "micro_batch": 4, "seq_len": 4096, "ep": 8, "recompute": "full"}, 12040),
    ("GPT-OSS 20B pre-train", "89e3a9fdd", "gpt-oss-20b", 8,
     {**MOE_TE, "global_batch": 256, "micro_batch": 2, "seq_len": 4096, "ep": 8, "recompute": "full",
      "attention_kernel": "fa2"}, 13058),
    ("GPT-OSS 120B pre-train", "89e3a9fdd", "gpt-oss-120b", 64,
     {**MOE_TE, "global_batch": 512, "micro_batch": 2, "seq_len": 4096, "ep": 64, "attention_kernel": "fa2"}, 7626),
    ("DeepSeek-V3 pre-train, 256 GPUs", "89e3a9fdd", "deepseek-v3", 256,
     {**MOE_TE, "global_batch": 512, "micro_batch": 1, "seq_len": 4096, "pp": 4, "vpp": 8, "ep": 64,
      "recompute": "full", "pp_local_batch": 8}, 1002),
    ("DeepSeek-V3 pre-train, 1,024 GPUs", "89e3a9fdd", "deepseek-v3", 1024,
     {**MOE_TE, "global_batch": 8192, "micro_batch": 1, "seq_len": 4096, "pp": 4, "vpp": 8, "ep": 64,
      "recompute": "full", "pp_local_batch": 8}, 865),
    ("Kimi K2 pre-train, 256 GPUs", "89e3a9fdd", KIMI_K2, 256,
     {**MOE_TE, "global_batch": 512, "micro_batch": 1, "seq_len": 4096, "pp": 8, "vpp": 4, "ep": 32,
      "recompute": "full", "pp_local_batch": 8}, 924),
    ("Nemotron 3 Nano pre-train", "bb0c0bfb0", NEMOTRON_3_NANO, 8,
     {**MOE_TE, "global_batch": 512, "micro_batch": 4, "seq_len": 4096, "ep": 8, "recompute": "full",
      "attention_kernel": "sdpa"}, 16789),
]


def hardware(n_gpus: int) -> dict:
    network = {"inter_node": {"bandwidth_gbps": 400, "ports_per_node": 8}} if n_gpus > 8 else {}
    return {"gpu": "H100-SXM5-80GB", "n_gpus": n_gpus, "gpus_per_node": 8, "intra_node": "nvlink4", **network}


# AutoModel's own Llama and Qwen2 classes, which NeMoAutoModelForCausalLM.from_pretrained picks before Hugging
# Face's (_transformers/auto_model.py: ModelRegistry first unless force_hf), fused q/k/v and gate/up into one
# linear each until 2013a4dd6 (components/models/llama/model.py and qwen2/model.py at 507bfb751 and 822effa16:
# CombinedQKVAttentionMixin, CombinedGateUpMLP); the framework entry describes the later, separate ones
COMBINED_PROJECTIONS = {"507bfb751", "822effa16"}


def row_model(model, commit: str):
    """The row's model as the commit's model code built it: fused projections where COMBINED_PROJECTIONS."""
    if commit not in COMBINED_PROJECTIONS or not isinstance(model, str):
        return model
    return load_model(model).model_copy(update={"fused_qkv": True, "fused_gate_up": True})


def row_job(model, n_gpus: int, training: dict, framework: str):
    """The job of one table row: FSDP2 (ZeRO 3) over the data-parallel ranks, in pure bf16: the
    models load in bf16 (`torch_dtype: bf16`; `from_config` turns "auto" into bf16,
    nemo_automodel/_transformers/auto_model.py), FSDP2 keeps that dtype as its parameters'
    (MixedPrecisionPolicy param_dtype bf16) and torch's Adam keeps its moments in the parameters'
    dtype: no fp32 master copy (`master_weights: false`)."""
    return load_job({"model": model, "hardware": hardware(n_gpus),
                     "training": {"framework": framework, "precision": "bf16", "zero": 3, "master_weights": False,
                                  **training}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", default="automodel", help="the jobs' training.framework (default automodel)")
    parser.add_argument("overrides", nargs="*", metavar="NAME=VALUE", help="a ModelParameters field changed")
    args = parser.parse_args()
    params = replace(DEFAULT_PARAMETERS, **parse_overrides(args.overrides))
    errors = []
    print(f"{'row':<42}{'commit':<11}{'measured':>9}{'estimate':>10}{'error':>8}{'GiB':>7}")
    for name, commit, model, n_gpus, training, measured in ROWS:
        result = estimate(row_job(row_model(model, commit), n_gpus, training, args.framework), params,
                          advise_fit=False)
        error = result.tokens_per_s_per_gpu / measured - 1
        errors.append(abs(error))
        fits = "" if result.fits else " (does not fit)"
        print(f"{name:<42}{commit:<11}{measured:>9.0f}{result.tokens_per_s_per_gpu:>10.0f}{error:>+8.1%}"
              f"{result.memory_per_gpu_gib:>7.1f}{fits}")
    print(f"mean absolute error {statistics.mean(errors):.1%} over {len(errors)} rows;"
          f" median {statistics.median(errors):.1%}")


if __name__ == "__main__":
    main()
