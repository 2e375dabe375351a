"""Selective recompute by module, as Megatron-Core runs it (`training.recompute_modules`).

Megatron-Core checkpoints the listed submodules of every layer (TransformerConfig
`recompute_modules`; transformer_layer.py, multi_latent_attention.py, moe/experts.py):

* `core_attn`, `mlp`, `moe` and `shared_experts` are ordinary checkpoints: the submodule keeps its
  input only and runs its forward again when the backward reaches it;
* `mla_up_proj`, `layernorm` and `moe_act` discard their output once the next op has consumed it
  (`CheckpointWithoutOutput`) and rebuild it just before that op's backward, so what the next op
  saved of it is not kept either. Under fp8 Megatron-Core has the linear after a recomputed norm
  keep the rebuilt 16-bit input instead of its quantized copy (`set_save_original_input`), so the
  copy the model counts goes too.

Norms: Transformer Engine's layer spec fuses a norm into the linear after it (LayerNormLinear),
except MLA's input norm (two down projections read it) and the norm before an MoE layer (the router
and the experts read it); `layernorm` recompute acts on those two only, the fused ones being
IdentityOp. `mlp` acts on dense layers only (`moe` is an MoE layer's), and a dense MLP's
checkpoint holds the fused norm, so its output goes with it.

Every function is per layer of the stage (the share of MoE layers weighting their part) and is
zero unless `recompute` is selective; `core_attn` is the attention core the core already redoes
(Korthikanti et al. 2022 §5), scaled by its flag there.
"""

from __future__ import annotations

from typing import Any

from trainrig.estimate import ops
from trainrig.estimate.inputs import Inputs, mla_kv_up_width

__all__ = ["lists_modules", "dropped_bytes_per_token", "redone_s", "redone_flops_per_token", "redone_kernels",
           "redone_tp_units", "redone_all_to_alls"]


def lists_modules(x: Inputs) -> bool:
    """Whether any row redoes a module beside the attention core (else every term here is 0)."""
    return x.recompute_modules_listed


def _selective(x: Inputs, recompute=None):
    recompute = x.recompute if recompute is None else recompute
    return ops.where(recompute == 1, 1.0, 0.0)


def dropped_bytes_per_token(x: Inputs, parts: dict[str, Any], recompute=None):
    """Bytes per token one layer no longer saves for its backward, from the layer's saved `parts`
    (memory.py): `mla_qkv` (MLA's assembled q, k and v), `attention_norm` and `mlp_norm` (the norm
    outputs the next linears keep), `dense_mlp`, `moe_mlp` (routed and shared experts),
    `routed_down` (the experts' down-projection input) and `shared` (the shared experts' set)."""
    moe = x.n_moe_layers / x.n_layers
    attention = x.mla * (x.redo_mla_up_proj * parts["mla_qkv"] + x.redo_layernorm * parts["attention_norm"])
    dense = x.redo_mlp * (parts["dense_mlp"] + parts["mlp_norm"])
    parts_of_moe = x.redo_moe_act * parts["routed_down"] + x.redo_shared_experts * parts["shared"]
    moe_layer = (x.redo_layernorm * parts["mlp_norm"] + x.redo_moe * parts["moe_mlp"]
                 + (1 - x.redo_moe) * parts_of_moe)
    return _selective(x, recompute) * (attention + x.dense_share * dense + moe * moe_layer)


def redone_s(x: Inputs, tokens, gemm: dict[str, Any]):
    """GPU seconds one layer spends redoing its listed modules' forward (core_attn apart): their
    GEMMs (`gemm`, core._gemm_times_s) and their elementwise work, each read of the input and write
    of the output at the HBM streaming rate (a norm: 2·h elements; an activation: its inputs and
    output). MLA's rotary is a few percent of its up projections' bytes and is left out."""
    hbm = x.hbm_bandwidth_gbs * 1e9
    e = x.activation_bytes
    rep = x.sequence_shards
    moe = x.n_moe_layers / x.n_layers
    activation_elements = x.mlp_matrices  # gate and up in, the product out (one in, one out ungated)
    norm = tokens * 2 * e * x.hidden / rep / hbm
    dense_activation = tokens * activation_elements * e * x.ffn_hidden / x.tp / hbm
    routed_activation = tokens * x.top_k * activation_elements * e * x.expert_ffn_hidden / x.tp / hbm
    shared_activation = tokens * activation_elements * e * x.n_shared_experts * x.shared_ffn_hidden / x.tp / hbm
    attention = x.mla * (x.redo_mla_up_proj * gemm["mla_up"][0] + x.redo_layernorm * norm)
    dense = x.redo_mlp * (gemm["dense_mlp"][0] + dense_activation + norm)
    shared = gemm["shared_mlp"][0] + shared_activation
    moe_layer = (x.redo_layernorm * norm
                 + x.redo_moe * (gemm["moe_mlp"][0] + routed_activation + shared_activation)
                 + (1 - x.redo_moe) * (x.redo_moe_act * routed_activation + x.redo_shared_experts * shared))
    return _selective(x) * (attention + x.dense_share * dense + moe * moe_layer)


def redone_flops_per_token(x: Inputs):
    """Forward GEMM FLOPs per token, over all layers, that the listed modules repeat: MLA's up
    projections (the query's from its latent, or from the hidden state without one), a dense
    layer's MLP, an MoE layer's experts and router, or its shared experts alone."""
    q_input = ops.where(x.q_lora_rank > 0, x.q_lora_rank, x.hidden)
    mla_up = 2 * (q_input * x.n_heads * x.head_dim + x.kv_lora_rank * mla_kv_up_width(x))
    dense = 2 * x.hidden * x.ffn_hidden * x.mlp_matrices
    shared = 2 * x.hidden * x.mlp_matrices * x.n_shared_experts * x.shared_ffn_hidden
    routed = 2 * x.hidden * (x.mlp_matrices * x.top_k * x.expert_ffn_hidden + x.n_experts)
    moe_layer = x.redo_moe * (routed + shared) + (1 - x.redo_moe) * x.redo_shared_experts * shared
    total = (x.n_layers * x.mla * x.redo_mla_up_proj * mla_up
             + x.n_dense_mlp_layers * x.redo_mlp * dense + x.n_moe_layers * moe_layer)
    return _selective(x) * total


def redone_kernels(x: Inputs):
    """Kernels one layer launches again for its listed modules (core_attn apart): MLA's two up
    projections, rotary on q and k and the two concatenations; a norm each; the experts'
    activation; a dense MLP's linears, activation and TP collectives; an MoE layer's router, top-k,
    permutations and grouped GEMMs (as host_issue._kernels_per_layer counts them) and shared experts."""
    moe = x.n_moe_layers / x.n_layers
    tp_collectives = ops.where(x.tp > 1, 1.0 + x.sequence_parallel_active, 0.0)
    mlp = x.mlp_input_linears + 1 + 1  # input linears, down projection, activation
    shared = ops.where(x.n_shared_experts > 0, mlp, 0.0)
    attention = x.mla * (x.redo_mla_up_proj * 6 + x.redo_layernorm)
    dense = x.redo_mlp * (mlp + tp_collectives)
    moe_layer = (x.redo_layernorm + x.redo_moe * (8 + shared)
                 + (1 - x.redo_moe) * (x.redo_moe_act + x.redo_shared_experts * shared))
    return _selective(x) * (attention + x.dense_share * dense + moe * moe_layer)


def redone_tp_units(x: Inputs):
    """TP collectives, in all-reduce units per layer, that redoing a whole MLP repeats: its forward
    all-reduce (an all-gather and reduce-scatter under sequence parallelism) — a dense MLP's, or an
    MoE layer's unless its experts run without TP and it has no shared expert (core's folded
    expert TP, which moves nothing over TP)."""
    moe = x.n_moe_layers / x.n_layers
    folded = (x.etp == 1) & (x.n_shared_experts == 0)
    moe_units = ops.where(folded, 0.0, x.redo_moe)
    return _selective(x) * ops.where(x.tp > 1, x.dense_share * x.redo_mlp + moe * moe_units, 0.0)


def redone_all_to_alls(x: Inputs):
    """Expert-parallel all-to-alls per MoE layer that redoing the MoE layer repeats: its forward
    dispatch and combine."""
    return _selective(x) * 2 * x.redo_moe
