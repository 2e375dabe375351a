"""A job's specs as the numbers `Inputs` holds (inputs.inputs_from_job): each categorical choice as
a code, the framework facts behind the byte and op counts (dequantization, fp8 casts, optimizer
states), and the fields each part of the job contributes (model, training, GPU, links, host).
"""

from __future__ import annotations

import numpy as np

from trainrig.estimate.params import ModelParameters
from trainrig.specs import Job, ModelSpec, TrainingSpec
from trainrig.specs.job import (
    RECOMPUTE_MODULES,
    expert_tp_degree,
    peft_casts_unquantized_to_fp32,
    resolve_attention_kernel,
    resolve_fp8_recipe,
)

__all__ = ["head_vocab_per_rank", "head_is_unaligned",
           "model_fields", "training_fields", "gpu_fields", "link_fields", "host_fields", "scale_up_domain",
           "optimizer_state_bytes", "optimizer_step_bytes", "padded_seq_len", "RECOMPUTE_CODE", "METHOD_CODE",
           "CP_KIND_CODE", "MOE_DISPATCHER_CODE", "QUANTIZED_WEIGHT_BYTES", "DEQUANT_BYTES_PER_WEIGHT",
           "DEQUANT_STREAM_FRACTION", "NVFP4_CAST_BYTES", "FP8_CAST_BYTES"]

RECOMPUTE_CODE = {"none": 0.0, "selective": 1.0, "full": 2.0}
PP_SCHEDULE_CODE = {"1f1b": 0.0, "gpipe": 1.0, "zb-h1": 2.0}
METHOD_CODE = {"full": 0.0, "lora": 1.0, "qlora": 2.0}
OFFLOAD_CODE = {"none": 0.0, "optimizer": 1.0, "parameters": 2.0, "all": 3.0}
LOSS_CODE = {"full": 0.0, "chunked": 1.0, "fused_linear": 2.0, "fused": 3.0}
CP_KIND_CODE = {"ring": 0.0, "all-gather": 1.0, "ulysses": 2.0}
# MoE token dispatch: a copy per routed expert, a gather of all tokens, or deduplicated per node and GPU
MOE_DISPATCHER_CODE = {"alltoall": 0.0, "allgather": 1.0, "deepep": 2.0, "hybridep": 2.0}
# Bytes per weight of a frozen base stored quantized, constants included (4 bits = 0.5 B):
# NF4 keeps an fp32 absmax per block of 64 (+4/64 B); double quantization stores those as 8 bits
# with an fp32 constant per 256 blocks (+(1 + 4/256)/64 B) (Dettmers et al. 2023, QLoRA §3);
# LLM.int8 one byte plus an fp32 scale per row (Dettmers et al. 2022), negligible per weight;
# GPTQ 4 bits plus a 16-bit scale and a 4-bit zero per group of 128 (Frantar et al. 2023; AutoGPTQ).
# HBM bytes one dequantization moves per weight. bitsandbytes (dequantize_4bit, int8) and torchao's
# NF4 run one kernel: read the storage, write 16 bits. AutoGPTQ's QuantLinear, for the ≥128-row
# inputs of training (exllama kernels have no backward, so PEFT disables them), unpacks with torch
# ops (auto_gptq qlinear_cuda_old forward): an int32 shift of every weight (read 0.5, write 4), a cast
# to int8 (4 → 1), a mask (1 → 1), the zero subtraction (1 → 1) and the fp16 scaling (1 → 2): 16.5.
DEQUANT_BYTES_PER_WEIGHT = {"nf4": 0.5 + 4 / 64 + 2, "nf4-double": 0.5 + (1 + 4 / 256) / 64 + 2, "int8": 1.0 + 2,
                            "gptq-int4": 0.5 + 4 + 4 + 1 + 1 + 1 + 1 + 1 + 1 + 2}
# Share of the streaming HBM rate those bytes move at. bitsandbytes' and torchao's single kernels
# stream (1). AutoGPTQ's torch ops are TensorIterator kernels on 1-byte elements and broadcast
# operands: ATen vectorizes only contiguous, same-dtype operands (CUDALoops.cuh), and then at most 4
# elements per access, 4 bytes for int8 (MemoryAccess.cuh can_vectorize_up_to; pytorch/pytorch#174553:
# vec8 stays disabled for 1-byte types on sm80/sm90). Measured: a 1-byte add at 0.51 of a copy's
# rate on B200 (#174553: add_scalar int8 87.67 µs vs clone 45.10 µs, 128 MB), int8 addition at 0.61 of
# fp32's on P100 (pytorch/pytorch#22612: 285 vs 465 GiB/s): 0.5.
DEQUANT_STREAM_FRACTION = {"gptq-int4": 0.5}
# Ops one dequantize-and-multiply issues beside the GEMM: bitsandbytes and torchao, a dequantize
# kernel and the output cast; AutoGPTQ's torch path, the shift, cast, add and mask of the zeros,
# the shift, cast and mask of the weights, the subtraction and scaling, and the input and output
# casts and bias add around its matmul (auto_gptq qlinear_cuda_old forward).
DEQUANT_OPS = {"nf4": 2.0, "nf4-double": 2.0, "int8": 2.0, "gptq-int4": 12.0}
QUANTIZED_WEIGHT_BYTES = {"nf4": 0.5 + 4 / 64, "nf4-double": 0.5 + (1 + 4 / 256) / 64, "int8": 1.0,
                          "gptq-int4": 0.5 + (2 + 0.5) / 128}
# HBM bytes per element of casting one 16-bit GEMM input to fp8, forward (the backward casts its
# gradients alike). Transformer Engine's cast kernels read the 16-bit tensor once and write the fp8
# copy and, for the backward's transposed GEMMs on Hopper, its transpose (read 2, write 1 + 1);
# `delayed` takes its scale from the amax history and records this amax in the same kernel, 3 bytes
# as counted before recipes existed (Micikevicius et al. 2022, FP8 Formats for Deep Learning §4; TE
# DelayedScaling). `tensorwise` (current scaling: TE Float8CurrentScaling, torchao's dynamic
# tensorwise) needs the tensor's amax before it can scale: one more read of the input (+2).
# `blockwise` (1×128 / 128×128 scales, DeepSeek-V3 §3.3; TE Float8BlockScaling) and `mxfp8` (OCP MX
# v1.0, 32-element blocks with E8M0 scales; TE MXFP8BlockScaling) scale each block as it is cast, but
# their row-wise and column-wise copies carry different scales, so both are quantized from the
# 16-bit input: read 2, write 1 + 1, + scales (4 bytes per 128, 1 per 32: ≈ 0.03).
FP8_CAST_BYTES = {"delayed": 3.0, "tensorwise": 5.0, "blockwise": 4.0 + 4 / 128, "mxfp8": 4.0 + 2 / 32}
# NVFP4 (precision fp4; NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv:2509.25149, and
# Transformer Engine NVFP4BlockScaling): the fp32 per-tensor scale needs the tensor's amax first (+2),
# then the row-wise and column-wise copies (the latter Hadamard-rotated for the weight gradient, in
# the same kernel) are quantized from the 16-bit input: read 2, write 0.5 + 0.5, and a 1-byte E4M3
# scale per 16 elements for each.
NVFP4_CAST_BYTES = 2.0 + 2.0 + 0.5 + 0.5 + 2 / 16
# Precisions whose linear layers run in a low-precision format while attention, the output head and
# the saved activations stay 16-bit (recipes: FP8_CAST_BYTES, NVFP4_CAST_BYTES).
LOW_PRECISION_LINEARS = ("fp8", "fp4")
NAN = float("nan")


# Transformer Engine GroupedLinear's fp8 casts per expert slice and GEMM input: split_quantize casts
# all slices in one fused kernel under delayed scaling, else loops over the experts, current scaling
# with 3 kernels each (amax, scale, cast-transpose), MXFP8 and blockwise with 1
# (transformer_engine/pytorch/csrc/extensions/cast.cpp, split_quantize)
GROUPED_QUANTIZE_OPS = {"delayed": 0.0, "tensorwise": 3.0, "blockwise": 1.0, "mxfp8": 1.0}


def _moe_host_op_fields(t: TrainingSpec, fw) -> dict[str, float]:
    """An MoE layer's small host ops (FrameworkSpec.moe_router_host_ops, moe_layer_host_ops,
    moe_expert_host_ops); a grouped GEMM's fp8 casts per expert beside its per-expert GEMMs: two
    inputs forward (the tokens into each linear), two output gradients backward."""
    per_expert_fwd, per_expert_bwd = fw.moe_expert_host_ops
    if per_expert_fwd and t.precision == "fp8":
        casts = 2 * GROUPED_QUANTIZE_OPS.get(resolve_fp8_recipe(t), 0.0)
        per_expert_fwd, per_expert_bwd = per_expert_fwd + casts, per_expert_bwd + casts
    return dict(moe_router_ops_fwd=fw.moe_router_host_ops[0], moe_router_ops_bwd=fw.moe_router_host_ops[1],
                moe_layer_ops_fwd=fw.moe_layer_host_ops[0], moe_layer_ops_bwd=fw.moe_layer_host_ops[1],
                moe_expert_ops_fwd=per_expert_fwd, moe_expert_ops_bwd=per_expert_bwd)


def _expert_tp_field(t: TrainingSpec) -> float:
    """The experts' TP degree where it is not tp (given, or the folding an ep past dp·cp needs);
    0 = tp, so that a search replacing tp carries it."""
    degree = expert_tp_degree(t)
    return float(degree) if t.expert_tp is not None or degree != t.tp else 0.0


def _explicit_pipeline_fields(t: TrainingSpec) -> dict[str, float]:
    """An explicit per-stage split as its first, last and fullest stage (zeros when unset)."""
    layers = t.pipeline_layers if t.pipeline_layers and t.pp > 1 else None
    if layers is None:
        return dict(pipeline_explicit=0.0, pipeline_first_layers=0.0, pipeline_last_layers=0.0,
                    pipeline_max_layers=0.0)
    return dict(pipeline_explicit=1.0, pipeline_first_layers=float(layers[0]),
                pipeline_last_layers=float(layers[-1]), pipeline_max_layers=float(max(layers)))


def model_fields(m: ModelSpec) -> dict[str, float]:
    """The model's shape and parameter counts as the numbers the core uses."""
    return dict(
        n_layers=m.n_layers, n_moe_layers=m.n_moe_layers, hidden=m.hidden, n_heads=m.n_heads,
        kv_heads=m.kv_heads, head_dim=m.head_width, v_head_dim=m.value_head_width, rope_head_dim=m.rope_head_width,
        mla=float(m.is_mla), q_lora_rank=m.q_lora_rank or 0, kv_lora_rank=m.kv_lora_rank or 0,
        ffn_hidden=m.ffn_hidden,
        mlp_matrices=3 if m.gated_mlp else 2, vocab=m.vocab,
        context_len_cap=float(m.sliding_window or np.inf), windowed_share=m.windowed_layer_share,
        rope=float(m.position_embedding == "rope"),
        n_experts=m.n_experts, top_k=m.top_k if m.is_moe else 0, expert_ffn_hidden=m.expert_ffn,
        n_shared_experts=m.n_shared_experts, shared_ffn_hidden=m.shared_ffn,
        params_total=m.n_params,
        params_attention_per_layer=m.attention_params_per_layer - m.attention_replicated_params_per_layer,
        params_attention_replicated_per_layer=m.attention_replicated_params_per_layer,
        params_dense_mlp_per_layer=m.mlp_params(m.ffn_hidden),
        **_layer_kind_fields(m),
        params_expert=m.mlp_params(m.expert_ffn) if m.is_moe else 0,
        params_moe_shared_per_layer=(m.n_shared_experts * m.mlp_params(m.shared_ffn)
                                     + m.hidden * m.n_experts) if m.is_moe else 0,
        params_norms_per_layer=2 * m.norm_params, params_final_norm=m.norm_params, params_embedding=m.embedding_params,
        tied_embeddings=float(m.tied_embeddings),
    ) | (_hybrid_fields(m) if m.is_hybrid else {})


def _layer_kind_fields(m: ModelSpec) -> dict[str, float]:
    """How many layers have each kind of block, and the Mamba-2 shape (zeros without Mamba layers).
    `dense_share` is written as the core wrote 1 − (MoE share) before hybrids, to the last bit."""
    mamba = m.n_mamba_layers > 0
    return dict(
        hybrid=float(m.is_hybrid), n_attention_layers=m.n_attention_layers, n_mamba_layers=m.n_mamba_layers,
        n_dense_mlp_layers=m.n_dense_mlp_layers, blocks_per_layer=m.n_blocks / m.n_layers,
        dense_share=m.n_dense_mlp_layers / m.n_layers if m.is_hybrid else 1 - m.n_moe_layers / m.n_layers,
        attention_share=m.n_attention_layers / m.n_layers, mamba_share=m.n_mamba_layers / m.n_layers,
        mlp_share=(m.n_dense_mlp_layers + m.n_moe_layers) / m.n_layers,
        mamba_inner=m.mamba_inner if mamba else 0, mamba_heads=m.mamba_heads_count if mamba else 0,
        mamba_head_dim=m.mamba_head_dim, mamba_state=m.mamba_state_dim, mamba_groups=m.mamba_groups if mamba else 0,
        mamba_conv=m.mamba_conv_kernel, mamba_chunk=m.mamba_chunk_size,
        mamba_in_width=m.mamba_in_proj_width if mamba else 0,
    )


def _hybrid_fields(m: ModelSpec) -> dict[str, float]:
    """A hybrid's parameters as the per-layer averages the core multiplies by a stage's layers: the
    mixers (attention and Mamba, all split over TP), the norms (one per block), and the dense MLPs
    over the layers without MoE (what `layers − moe_layers` counts)."""
    layers, non_moe = m.n_layers, m.n_layers - m.n_moe_layers
    attention = m.attention_params_per_layer - m.attention_replicated_params_per_layer
    mixers = attention * m.n_attention_layers + m.mamba_params_per_layer * m.n_mamba_layers
    return dict(
        params_attention_per_layer=mixers / layers,
        params_attention_replicated_per_layer=m.attention_replicated_params_per_layer * m.n_attention_layers / layers,
        params_dense_mlp_per_layer=m.mlp_params(m.ffn_hidden) * m.n_dense_mlp_layers / non_moe if non_moe else 0.0,
        params_norms_per_layer=m.norm_params,
    )


# Optimizer moments per trainable parameter, in units of the moment's element (fp32 under mixed
# precision or fp32 training, the training precision when pure low-precision): AdamW keeps m and v
# (Rajbhandari et al. 2020, ZeRO §3: with the fp32 master copy, 12 of the "16Ψ"); 8-bit Adam
# stores them in one byte each whatever the precision (Dettmers et al. 2022); SGD keeps momentum;
# Adafactor keeps factored second moments only (Shazeer & Stern 2018), negligible per parameter.
OPTIMIZER_MOMENTS = {"adamw": 2, "paged_adamw": 2, "adam8bit": 0, "paged_adamw8bit": 0, "sgd": 1, "adafactor": 0}
EIGHT_BIT_MOMENT_BYTES = {"adam8bit": 2, "paged_adamw8bit": 2}
# Bytes the optimizer step streams per parameter (reads + writes of grads, states, master, weights).
MOMENT_DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}
OPTIMIZER_STEP_BYTES = {"adamw": 34, "paged_adamw": 34, "adam8bit": 22, "paged_adamw8bit": 22, "sgd": 22,
                        "adafactor": 18}


def optimizer_state_bytes(t) -> float:
    """Optimizer state per trainable parameter: the fp32 master copy of a mixed-precision full
    fine-tune (LoRA adapters are themselves the fp32 copy under AMP), plus the moments: fp32 under
    mixed precision, the training precision when training is pure, always fp32 for bitsandbytes'
    32-bit paged AdamW (its state buffers are float32 whatever the parameters' dtype)."""
    fp32 = t.precision == "fp32"
    master = 4.0 if (t.master_weights and not fp32 and t.method == "full") else 0.0
    return master + OPTIMIZER_MOMENTS[t.optimizer] * _moment_bytes(t) + EIGHT_BIT_MOMENT_BYTES.get(t.optimizer, 0.0)


def _moment_bytes(t) -> float:
    """Bytes of one moment element: `optimizer_moment_dtype` where given (Megatron-Core's
    precision-aware optimizer), else fp32 under mixed precision, fp32 training or bitsandbytes'
    32-bit paged AdamW, the 16-bit training precision when training is pure."""
    if t.optimizer_moment_dtype is not None:
        return MOMENT_DTYPE_BYTES[t.optimizer_moment_dtype]
    return 4.0 if (t.master_weights or t.precision == "fp32" or t.optimizer == "paged_adamw") else 2.0


def _embedding_state_bytes(t) -> float:
    """Moments of an embedding trained beside LoRA: PyTorch optimizers keep them in the parameter's
    dtype (the model's precision); bitsandbytes' 32-bit paged AdamW in fp32, 8-bit ones in a byte."""
    if t.optimizer in EIGHT_BIT_MOMENT_BYTES:
        return float(EIGHT_BIT_MOMENT_BYTES[t.optimizer])
    element = 4.0 if (t.optimizer == "paged_adamw" or t.precision == "fp32") else 2.0
    return OPTIMIZER_MOMENTS[t.optimizer] * element


def _grad_bytes(t, mixed: bool) -> float:
    """Bytes of one accumulated gradient: `grad_reduce_dtype` where given, else 4 under mixed
    precision (Megatron's main_grad, PyTorch AMP, FSDP's reduce_dtype) and fp32 training, 2 when a
    pure 16-bit run keeps them in its own precision."""
    if t.grad_reduce_dtype is not None:
        return 4.0 if t.grad_reduce_dtype == "fp32" else 2.0
    return 4.0 if (t.master_weights or not mixed) else 2.0


def optimizer_step_bytes(t) -> float:
    """Bytes the optimizer step moves per trainable parameter. Mixed precision: the table above.
    Pure low precision: read the gradient, the states and the weight, write the states and the
    weight back, all in their own precision (no master copy to keep in step)."""
    if t.master_weights or t.precision == "fp32":
        # the table's moments are fp32, each read and written once per step
        narrower = OPTIMIZER_MOMENTS[t.optimizer] * 2 * (4.0 - _moment_bytes(t))
        # the table reads an fp32 gradient; 16-bit ones (grad_reduce_dtype) are read at their width
        grads = 2.0 if t.grad_reduce_dtype in ("bf16", "fp16") else 0.0
        return float(OPTIMIZER_STEP_BYTES[t.optimizer]) - narrower - grads
    element = 2.0
    return element + 2 * optimizer_state_bytes(t) + 2 * element


def padded_seq_len(t) -> float:
    """Tokens per sample as computed. Packed: seq_len. Unpacked: each micro-batch is padded to its
    longest sample; with lengths spread evenly up to min(2·mean, seq_len), the expected longest of
    b samples is that cap · b/(b+1) (the mean itself for one sample)."""
    if t.packing or t.mean_seq_len is None:
        return float(t.seq_len)
    cap = min(2.0 * t.mean_seq_len, t.seq_len)
    return max(float(t.mean_seq_len), cap * t.micro_batch / (t.micro_batch + 1))


def _attention_fields(job: Job) -> dict[str, float]:
    """The attention kernel asked for, down to the best one the GPU runs (named in the warnings):
    fused or not, its FlashAttention class (1 or 2) and its speed relative to FlashAttention-2."""
    t, gpu = job.training, job.hardware.gpu
    _, kernel = resolve_attention_kernel(t, gpu)
    forward, backward = gpu.attention_kernel_speed(kernel)
    return dict(flash_attention=float(kernel != "eager"),
                flash_attention_version=1.0 if kernel == "fa1" else 2.0,
                attention_fwd_speed=forward, attention_bwd_speed=backward,
                fp8_cast_bytes=_cast_bytes(t))


# Bytes per element of a linear input kept in its quantized format: fp8 1 (E4M3/E5M2; the per-block
# scales of MXFP8, one byte per 32, are left out), NVFP4 4 bits + an E4M3 scale per 16 (0.5625)
QUANTIZED_INPUT_BYTES = {"fp8": 1.0, "fp4": 0.5625}


def _saved_input_bytes(t, fw) -> float:
    """What a linear's saved input costs per element: the quantized copy where the framework keeps
    it (FrameworkSpec.low_precision_saves_quantized_inputs) and every weight trains, else 16 bits."""
    sixteen = 4.0 if t.precision == "fp32" else 2.0
    if fw.low_precision_saves_quantized_inputs and t.precision in QUANTIZED_INPUT_BYTES and t.method == "full":
        return QUANTIZED_INPUT_BYTES[t.precision]
    return sixteen


def _cuda_graph_fields(t) -> dict[str, float]:
    """What the job's CUDA graphs capture, as flags (TrainingSpec.cuda_graph_scope)."""
    scope = set(t.cuda_graph_scope or ())
    whole = "layer" in scope
    return dict(graph_full=float("full_iteration" in scope), graph_attention=float(whole or "attn" in scope),
                graph_mlp=float(whole or "mlp" in scope), graph_moe=float(whole or "moe" in scope),
                graph_router=float("moe_router" in scope))


def _recompute_module_fields(t) -> dict[str, float]:
    """One flag per Megatron-Core recompute module: the job's list, else the attention core alone
    (what selective recompute redoes wherever it is not an op-level policy)."""
    listed = ("core_attn",) if t.recompute_modules is None else t.recompute_modules
    return {f"redo_{name}": float(name in listed) for name in RECOMPUTE_MODULES}


def _cast_bytes(t) -> float:
    """HBM bytes per element of casting a linear's 16-bit input to its low-precision format; 0 in 16 bits."""
    return NVFP4_CAST_BYTES if t.precision == "fp4" else FP8_CAST_BYTES.get(resolve_fp8_recipe(t), 0.0)


def lora_dropout(t: TrainingSpec, fw) -> float:
    """The adapters' dropout: the job's `lora_dropout`, else its framework's default."""
    return fw.lora_dropout if t.lora_dropout is None else t.lora_dropout


def _adapter_host_ops(t: TrainingSpec, fw) -> tuple[float, float]:
    """One adapter's host work per micro-batch in eager ops, (forward, backward): the framework's
    measurement, else its small ops one each (A, B and the scaled add, + dropout; backward twice)."""
    if fw.lora_adapter_host_ops is not None:
        return fw.lora_adapter_host_ops
    forward = 3.0 + float(lora_dropout(t, fw) > 0)
    return forward, 2 * forward


def training_fields(job: Job) -> dict[str, float]:
    t, fw = job.training, job.framework
    mixed = t.precision != "fp32"
    element_bytes = 2 if mixed else 4  # a 16-bit or fp32 element of the training precision
    targets = t.lora_modules
    quantization = t.base_quantization
    fused_qkv, fused_gate_up = job.projections_fused()
    adapter_ops = _adapter_host_ops(t, fw)
    return dict(
        seq_len=t.seq_len, micro_batch=t.micro_batch,
        global_batch=t.global_batch, tp=t.tp, pp=t.pp, cp=t.cp, ep=t.ep, expert_tp=_expert_tp_field(t),
        dp=t.dp_degree, vpp=t.vpp,
        pp_embedding_slot=float(t.account_for_embedding_in_pipeline_split),
        pp_loss_slot=float(t.account_for_loss_in_pipeline_split), **_explicit_pipeline_fields(t),
        mtp_layers=t.mtp_layers,
        pp_schedule=PP_SCHEDULE_CODE[t.pp_schedule], pp_local_batch=float(t.pp_local_batch or 0),
        zero=t.zero, recompute=RECOMPUTE_CODE[t.recompute],
        recompute_num_layers=float(t.recompute_num_layers or np.inf), dp_shard=float(t.dp_shard or t.dp_degree),
        sequence_parallel=float(t.sequence_parallel),
        tp_comm_overlap=float(t.tp_comm_overlap), cp_kind=CP_KIND_CODE[t.cp_kind],
        moe_dispatcher=MOE_DISPATCHER_CODE[t.moe_dispatcher or "alltoall"], moe_a2a_overlap=float(t.moe_a2a_overlap),
        **_cuda_graph_fields(t),
        **_attention_fields(job),
        fused_kernels=float(t.kernels_fused(fw.fused_kernels)), dropout=float(t.dropout),
        activation_bytes=element_bytes, weight_bytes=element_bytes,
        # gradients are accumulated and reduced in fp32 by default (Megatron's main_grad, PyTorch
        # AMP, FSDP reduce_dtype): 4 bytes; MODELING.md's 18 B/param for Megatron. Pure
        # low-precision training keeps them in the training precision.
        grad_bytes=_grad_bytes(t, mixed),
        optimizer_bytes=optimizer_state_bytes(t),
        optimizer_rw_bytes=optimizer_step_bytes(t),
        fp8=float(t.precision in LOW_PRECISION_LINEARS), method=METHOD_CODE[t.method], lora_rank=t.lora_rank,
        frozen_weight_bytes=QUANTIZED_WEIGHT_BYTES.get(quantization, element_bytes),
        unquantized_weight_bytes=4 if peft_casts_unquantized_to_fp32(t, fw) else element_bytes,
        quantized=float(quantization != "none"),
        dequant_bytes_per_weight=DEQUANT_BYTES_PER_WEIGHT.get(quantization, 0.0)
        / DEQUANT_STREAM_FRACTION.get(quantization, 1.0),
        dequant_ops=DEQUANT_OPS.get(quantization, 0.0),
        dequant_saved_for_backward=float(quantization == "gptq-int4"),
        **{f"lora_{name}": float(name in targets) for name in ("q", "k", "v", "o", "gate", "up", "down")},
        lora_dropout=float(lora_dropout(t, fw) > 0 and fw.lora_dropout_position == "input"),
        lora_output_dropout=float(lora_dropout(t, fw) > 0 and fw.lora_dropout_position == "output"),
        train_embeddings=float(t.train_embeddings),
        fused_qkv=float(fused_qkv), fused_gate_up=float(fused_gate_up),
        lora_forward_ops=adapter_ops[0], lora_backward_ops=adapter_ops[1],
        **_moe_host_op_fields(t, fw),
        embedding_state_bytes=_embedding_state_bytes(t),
        master_weights=float(t.master_weights and mixed), paged_optimizer=float(t.optimizer.startswith("paged")),
        optimizer_in_backward=float(t.optimizer_in_backward), loss_kind=LOSS_CODE[t.loss],
        loss_upcast=float(t.loss_upcast or not mixed), loss_shift_copy=float(t.loss_shift_copy),
        activation_offload=float(t.activation_offload),
        activation_offload_layers=float(t.activation_offload_layers or np.inf),
        offload_nvme=float(t.offload_device == "nvme"),
        real_seq_len=float(t.real_seq_len), compute_seq_len=padded_seq_len(t),
        packed_sample_len=float(t.packed_sample_len or np.inf),
        persistent_grad_buffer=float(fw.persistent_grad_buffer),
        fsdp_unsharded_accumulation=float(fw.fsdp_unsharded_accumulation),
        fsdp_frozen_params_get_grads=float(fw.fsdp_frozen_params_get_grads),
        fused_qkv_view_saved=float(fw.fused_qkv_view_saved), eager_norm_upcast=float(fw.eager_norm_upcast),
        swiglu_saves_activation=float(fw.swiglu_saves_activation), zero3_module_fetch_us=fw.zero3_module_fetch_us,
        selective_recompute_ops=float(fw.selective_recompute == "ops" and t.recompute_modules is None),
        **_recompute_module_fields(t),
        checkpoint_early_stop=float(fw.checkpoint_early_stop),
        zero3_gather_host_ops=fw.zero3_gather_host_ops,
        zero3_grad_full_passes=fw.zero3_grad_full_passes, zero3_grad_shard_passes=fw.zero3_grad_shard_passes,
        zero3_step_extra_bytes=fw.zero3_step_extra_bytes,
        dp_bucket_elements=fw.dp_bucket_elements,
        dp_bucket_elements_per_rank=fw.dp_bucket_elements_per_rank,
        dp_param_gather_overlap=float(fw.dp_param_gather_overlap),
        fsdp_unsharded_under_pp=float(fw.fsdp_unsharded_under_pp),
        tp_overlap_micro_pipeline=float(fw.tp_overlap_micro_pipeline),
        # async TP (compiled by definition) is told apart in host_issue, as a planner's rows vary tp and overlap
        tp_dtensor_eager=float(fw.tp_dtensor and not t.compile),
        pp_p2p_overlap=float(fw.pp_p2p_overlap if t.pp_comm_overlap is None else t.pp_comm_overlap),
        zero3_16bit_shard_copy=float(fw.zero3_16bit_shard_copy),
        fp8_all_gather=float(t.fp8_all_gather and t.precision == "fp8"),
        saved_input_bytes=_saved_input_bytes(t, fw),
        loss_parallel_bytes=float(fw.loss_parallel_bytes_per_logit or 0.0),
        loss_bytes=float(fw.loss_bytes_per_logit or 0.0),
        quantized_linear_saves_input=float(fw.quantized_linear_saves_input),
        offload=OFFLOAD_CODE[t.offload], pretokenized=float(t.data_format == "pretokenized"),
        checkpoint_interval_steps=float(t.checkpoint_interval_steps or np.inf),
        loader_workers_per_gpu=t.loader_workers_per_gpu,
    )


# a stack with no stated padding (`custom`) is taken to pad as pretraining codebases do: flash-attn's
# GPT trainer to 8 (pad_vocab_size_multiple), nanoGPT and llm.c to 64, Megatron to 128
ASSUMED_VOCAB_PADDING = 8
ALIGNED_ELEMENTS = 8  # 16 bytes of 16-bit elements: what cuBLAS's fast (TMA/vectorized) kernels need


def head_vocab_per_rank(job: Job, multiple: int | None = None) -> int:
    """The output layer's vocabulary on one tensor-parallel rank, as the stack pads it
    (`training.vocab_padding_multiple`, rounded up per rank as Megatron-Core does), or padded to
    `multiple` when given."""
    t = job.training
    multiple = multiple or t.vocab_padding_multiple or ASSUMED_VOCAB_PADDING
    return -(-job.model.vocab // (multiple * t.tp)) * multiple


def head_is_unaligned(job: Job) -> bool:
    """Whether the head's GEMMs run on cuBLAS's unaligned kernels (`misaligned_gemm_fraction`)."""
    return head_vocab_per_rank(job) % ALIGNED_ELEMENTS != 0


def _measured_over_expected(profile, gpu_id: str, precision: str) -> float | None:
    """A profile's GEMM rate over what a healthy GPU of its type reaches in the same sweep
    (HardwareProfile.gemm_expected_tflops), when the profile measured this catalog GPU."""
    measured, expected = profile.gemm_tflops.get(precision), profile.gemm_expected_tflops.get(precision)
    if not measured or not expected or profile.gpu_catalog_id != gpu_id:
        return None
    return measured / expected


def gpu_fields(job: Job, params: ModelParameters) -> dict[str, float]:
    gpu, t, profile = job.hardware.gpu, job.training, job.hardware.profile
    gemm_precision = t.precision
    peak = gpu.peak(gemm_precision)
    low = t.precision in LOW_PRECISION_LINEARS
    attention_peak = gpu.peak("bf16" if low else t.precision)
    efficiency = (gpu.matmul_efficiency or params.default_matmul_efficiency) * params.sustained_matmul_fraction
    if low:  # fp4 GEMMs have no published MAMF: they take fp8's ratio to bf16 (named in the assumptions)
        efficiency *= params.fp8_matmul_ratio
    if t.precision == "fp32":
        # vector FP32 units have no tensor-core feed limit; cuBLAS SGEMM reaches ~90% of peak
        efficiency = 0.9 * params.sustained_matmul_fraction
    attention = (gpu.attention_efficiency or params.default_attention_efficiency) * params.sustained_matmul_fraction
    hbm = gpu.memory_bandwidth_gbs * params.memory_efficiency
    # fp8 recipes run the linear layers in fp8 and keep the output head in bf16: Megatron-Core's
    # output_layer is a plain ColumnParallelLinear outside Transformer Engine's fp8_autocast, and
    # torchtitan's float8 converter skips `output` (its filter_fqns)
    head_peak, head_efficiency = peak, efficiency
    if low:
        head_peak, head_efficiency = attention_peak, efficiency / params.fp8_matmul_ratio
    if profile is not None:
        measured = profile.gemm_tflops.get(gemm_precision)
        health = _measured_over_expected(profile, gpu.id, gemm_precision)
        if health:  # the probe's verdict on this GPU against a healthy one of its type scales the catalog's rates
            bf16_health = _measured_over_expected(profile, gpu.id, "bf16") or health
            peak *= health
            attention_peak *= bf16_health if low else health
            head_peak *= bf16_health if low else health
        elif measured:
            peak, efficiency = measured, params.sustained_matmul_fraction
            attention_peak = profile.gemm_tflops.get("bf16", attention_peak) if low else measured
            head_peak, head_efficiency = (attention_peak, efficiency) if low else (peak, efficiency)
        hbm = profile.memory_bandwidth_gbs or hbm
    if head_is_unaligned(job):
        head_efficiency *= params.misaligned_gemm_fraction
    # MFU is a utilization: model FLOPs over the peak of the units the GEMMs run on, the fp8 rate
    # for fp8 (against bf16's, as torchtitan quotes fp8 runs, a fast fp8 run passes 100%)
    mfu_peak = gpu.peak(t.precision)
    return dict(
        gemm_peak_tflops=peak, attention_peak_tflops=attention_peak, mfu_peak_tflops=mfu_peak,
        head_gemm_peak_tflops=head_peak, head_matmul_efficiency=head_efficiency,
        matmul_efficiency=efficiency, attention_efficiency=attention, compute_units=gpu.compute_units,
        hbm_bandwidth_gbs=hbm,
        memory_gib=gpu.memory_gib,
    )


def link_fields(job: Job) -> dict[str, float]:
    hw = job.hardware
    profile = hw.profile
    intra = hw.intra_node.bandwidth_gbs * hw.intra_node.efficiency
    if hw.gpu.scale_up == hw.intra_node.id and hw.gpu.scale_up_gbs:
        intra = hw.gpu.scale_up_gbs / 2 * hw.intra_node.efficiency  # the part's own link count
    pcie = hw.host_link.bandwidth_gbs * hw.host_link.efficiency
    if profile is not None:
        intra = profile.intra_node_busbw_gbs or intra
        pcie = profile.pcie_h2d_gbs or pcie
    net = hw.inter_node
    inter = net.node_bandwidth_gbs * net.link.efficiency if net else NAN
    if profile is not None and profile.inter_node_busbw_gbs and net:
        inter = profile.inter_node_busbw_gbs * hw.gpus_in_node
    domain = scale_up_domain(hw)
    fabric_gpus, n_fabrics = _scale_up_fabrics(hw, domain)
    return dict(
        intra_bandwidth_gbs=intra, intra_latency_us=hw.intra_node.latency_us,
        scale_up_domain=float(min(domain, fabric_gpus) if domain else hw.gpus_in_node), pcie_peer_gbs=pcie,
        fabric_gpus=float(fabric_gpus), n_fabrics=float(n_fabrics),
        inter_node_bandwidth_gbs=inter, inter_latency_us=net.link.latency_us if net else NAN,
        pcie_bandwidth_gbs=pcie / hw.gpus_per_pcie_switch, pcie_latency_us=hw.host_link.latency_us,
        gpus_per_node=hw.gpus_in_node, n_nodes=hw.n_nodes,
    )


def scale_up_domain(hw) -> int | None:
    """GPUs the GPU's own scale-up fabric joins (its catalog `scale_up_domain`), where the node links
    its GPUs with that fabric; None = the whole node (or a node wired with another link)."""
    return hw.gpu.scale_up_domain if hw.intra_node.id == hw.gpu.scale_up else None


def _scale_up_fabrics(hw, domain: int | None) -> tuple[int, int]:
    """(GPUs one scale-up fabric joins, fabrics the job spans). A domain larger than a node is a
    fabric across nodes (GB200/GB300 NVL72: 18 trays of 4 GPUs behind NVLink switch trays): whole
    nodes of it, at most the job's GPUs. Otherwise each node is its own fabric."""
    if not domain or domain <= hw.gpus_per_node or hw.n_nodes == 1:
        return hw.gpus_in_node, hw.n_nodes
    nodes_per_fabric = domain // hw.gpus_per_node
    return min(nodes_per_fabric * hw.gpus_per_node, hw.n_gpus), -(-hw.n_nodes // nodes_per_fabric)


def host_fields(job: Job, params: ModelParameters) -> dict[str, float]:
    hw, profile = job.hardware, job.hardware.profile
    cores = hw.cpu_cores_per_node or (profile.cpu_cores if profile else None)
    host_bw = NAN
    if hw.host_memory is not None and hw.cpu is not None:
        sockets = max(1, round((cores or hw.cpu.cores) / hw.cpu.cores))
        host_bw = hw.host_memory.per_channel_gbs * hw.cpu.memory_channels * sockets * hw.host_memory.efficiency
    if profile is not None and profile.host_memory_bandwidth_gbs:
        host_bw = profile.host_memory_bandwidth_gbs
    read = hw.storage.seq_read_gbs if hw.storage else NAN
    write = hw.storage.seq_write_gbs if hw.storage else NAN
    if profile is not None:
        read = profile.storage_read_gbs or read
        write = profile.storage_write_gbs or write
    collate = (profile.collate_tokens_per_s_per_core if profile else None) or params.collate_tokens_per_s_per_core
    tokenize = (profile.tokenize_tokens_per_s_per_core if profile else None) or params.tokenize_tokens_per_s_per_core
    return dict(
        cpu_cores_per_node=float(cores) if cores else NAN, host_memory_bandwidth_gbs=host_bw,
        storage_read_gbs=read, storage_write_gbs=write,
        ram_gb_per_node=hw.ram_gb_per_node or NAN,
        collate_rate_per_core=collate, tokenize_rate_per_core=tokenize,
        kernel_launch_us=params.kernel_launch_us,
    )
