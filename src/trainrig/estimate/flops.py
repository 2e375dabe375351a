"""FLOP accounting per token, in the convention of Korthikanti et al. 2022 (and Narayanan et al.
2021, eq. 3): every GEMM counted at 2 FLOPs per multiply-add, attention scores over the full
sequence (not halved for the causal mask), training = forward + backward = 3 × forward.

For a GPT layer this is 72·B·s·h²·(1 + s/(6h)) per layer plus 6·B·s·h·V for the logits — the
formula Korthikanti et al. use for MFU. Hardware FLOPs add what recomputation executes again.
All functions take `Inputs` whose fields may be numpy arrays.
"""

from __future__ import annotations

from types import SimpleNamespace

from trainrig.estimate import mamba, module_recompute, ops
from trainrig.estimate.inputs import Inputs, attended_keys, mla_kv_up_width
from trainrig.estimate.job_fields import METHOD_CODE, model_fields
from trainrig.specs import ModelSpec

__all__ = [
    "flops_per_token",
    "attention_context",
    "layer_gemm_flops_per_token",
    "attention_flops_per_token",
    "logits_flops_per_token",
    "model_flops_per_token",
    "hardware_flops_per_token",
    "op_level_recompute_flops_per_token",
    "attention_projection_weights",
    "mtp_gemm_flops_per_token",
]


def attention_context(x: Inputs):
    """Keys each query attends to in the FLOP convention: the whole sequence, capped by a window in
    the layers that have one (inputs.attended_keys)."""
    return attended_keys(x)


def layer_gemm_flops_per_token(x: Inputs):
    """Forward GEMM FLOPs of all transformer layers for one token (MoE: only the routed experts)."""
    projections = 2 * attention_projection_weights(x)
    dense_mlp = 2 * x.hidden * x.ffn_hidden * x.mlp_matrices
    moe_mlp = 2 * x.hidden * x.mlp_matrices * (
        x.top_k * x.expert_ffn_hidden + x.n_shared_experts * x.shared_ffn_hidden
    ) + 2 * x.hidden * x.n_experts  # router
    dense_layers = x.n_dense_mlp_layers
    total = x.n_attention_layers * projections + dense_layers * dense_mlp + x.n_moe_layers * moe_mlp
    if ops.any(x.n_mamba_layers > 0):  # a hybrid's Mamba-2 in and out projections
        total = total + x.n_mamba_layers * mamba.gemm_flops_per_token(x)
    return total


def attention_projection_weights(x: Inputs):
    """Weights of one layer's attention linears, the multiply-adds they do per token: q, k, v and
    o (GQA narrows k and v), or MLA's down and up projections and o (ModelSpec.mla_projections)."""
    q_width = x.n_heads * x.head_dim
    kv_heads = x.kv_heads
    output = x.n_heads * x.v_head_dim * x.hidden
    direct = x.hidden * (q_width + kv_heads * (x.head_dim + x.v_head_dim))
    if not ops.any(x.mla > 0):
        return direct + output
    rank_q, rank_kv = x.q_lora_rank, x.kv_lora_rank
    query = ops.where(rank_q > 0, x.hidden * rank_q + rank_q * q_width, x.hidden * q_width)
    key_value = (x.hidden * (rank_kv + x.rope_head_dim)
                 + rank_kv * mla_kv_up_width(x))
    return ops.where(x.mla > 0, query + key_value, direct) + output


def attention_flops_per_token(x: Inputs):
    """Forward FLOPs of QKᵀ and attention·V for one token over all attention layers: 2·ctx·heads·d_qk
    + 2·ctx·heads·d_v (4·ctx·heads·d with one head width)."""
    return x.n_attention_layers * 2 * attention_context(x) * x.n_heads * (x.head_dim + x.v_head_dim)


def logits_flops_per_token(x: Inputs):
    """Forward FLOPs of the output projection for one token."""
    return 2 * x.hidden * x.vocab


def model_flops_per_token(x: Inputs):
    """Training FLOPs per token without recomputation.

    Full training: 3 × forward. LoRA/QLoRA: frozen weights need only input gradients, so their
    GEMMs cost 2 × forward; attention (no weights) still costs 3 × (Hu et al. 2021 §4.2).
    """
    gemm = layer_gemm_flops_per_token(x) + logits_flops_per_token(x) + mtp_gemm_flops_per_token(x)
    gemm_factor = ops.where(x.method > 0, 2.0, 3.0)
    return gemm_factor * gemm + 3 * weightless_flops_per_token(x) * (1 + x.mtp_layers / x.n_layers)


def weightless_flops_per_token(x: Inputs):
    """Forward FLOPs of the work without trained weights: the attention products, and a hybrid's
    Mamba-2 convolutions and SSD scans (mamba.scan_flops_per_token; their convolution's few weights
    counted with them)."""
    if not ops.any(x.n_mamba_layers > 0):
        return attention_flops_per_token(x)
    return attention_flops_per_token(x) + x.n_mamba_layers * mamba.scan_flops_per_token(x)


def mtp_gemm_flops_per_token(x: Inputs):
    """Forward GEMM FLOPs of the multi-token prediction modules for one token (DeepSeek-V3 §2.2):
    each one more layer (the model's average), the 2·hidden → hidden projection, the output head."""
    layer = layer_gemm_flops_per_token(x) / x.n_layers
    return x.mtp_layers * (layer + 2 * 2 * x.hidden * x.hidden + logits_flops_per_token(x))


def op_level_recompute_flops_per_token(x: Inputs):
    """Forward GEMM FLOPs per token that torchtitan's op-level selective recompute repeats (core.py
    `_op_level_recomputed_gemms`): k and a gated dense MLP's up projection where each is a linear
    of its own, and o (kept as its reduce-scattered output under sequence parallelism)."""
    redo_k, redo_o, redo_up = x.op_level_redone_linears
    attention = 2 * (redo_k * op_level_key_weights(x) + redo_o * x.n_heads * x.v_head_dim * x.hidden)
    return x.n_attention_layers * attention + x.n_dense_mlp_layers * redo_up * 2 * x.hidden * x.ffn_hidden


def op_level_key_weights(x: Inputs):
    """Weights of the key linear op-level selective recompute redoes: k, or under MLA the key/value
    up projection (the policy's even matmul there; see core._op_level_recomputed_gemms)."""
    return ops.where(x.mla > 0, x.kv_lora_rank * mla_kv_up_width(x), x.hidden * x.kv_heads * x.head_dim)


def hardware_flops_per_token(x: Inputs):
    """Model FLOPs plus recomputation: full recompute repeats every layer's forward (its share of
    them with `recompute_num_layers`); selective
    repeats the attention products (Korthikanti et al. 2022 §5, their HFU; Megatron-Core's
    core-attention checkpoint with flash attention too) or, under an op-level policy, the GEMMs
    that policy drops."""
    layers_forward = layer_gemm_flops_per_token(x) + weightless_flops_per_token(x)
    op_level = (x.flash_attention > 0) & (x.selective_recompute_ops > 0)  # memory.op_level_recompute
    # Megatron-Core's recompute_modules: the attention core where core_attn is listed, and the modules beside it
    modules = x.redo_core_attn * attention_flops_per_token(x)
    if module_recompute.lists_modules(x):
        modules = modules + module_recompute.redone_flops_per_token(x)
    selective = ops.where(op_level, op_level_recompute_flops_per_token(x), modules)
    # an early-stopping checkpoint does not redo the dense MLP's down projection
    down = x.n_dense_mlp_layers * 2 * x.hidden * x.ffn_hidden * x.checkpoint_early_stop
    recompute = ops.where(x.recompute == 2, x.full_recompute_share * (layers_forward - down),
                          ops.where(x.recompute == 1, selective, 0.0))
    return model_flops_per_token(x) + recompute


def flops_per_token(model: ModelSpec, seq_len: int, method: str = "full") -> float:
    """Model training FLOPs per token for a model and sequence length (no recomputation) — what a
    monitor multiplies by measured tokens/s to get live MFU."""
    fields = {**model_fields(model), "seq_len": float(seq_len), "method": METHOD_CODE[method], "mtp_layers": 0.0}
    return float(model_flops_per_token(SimpleNamespace(**fields)))
