"""Memory per GPU: weights, gradients, optimizer states, activations and the rest.

Sources: mixed-precision Adam's 16–18 bytes per parameter (Rajbhandari et al. 2020 ZeRO §3;
Megatron-LM `theoretical_memory_usage.py`); activations per layer s·b·h·(34 + 5·a·s/h) bytes and
their division under tensor and sequence parallelism and recomputation (Korthikanti et al. 2022,
Table 2 and §4); the first pipeline stage holds up to p micro-batches under 1F1B and
L·(1 + (p−1)/(p·v)) layers' worth under interleaving (ibid. §4.2.3). All vectorized over `Inputs`.
"""

from __future__ import annotations

import numpy as np

from trainrig.estimate.inputs import Inputs
from trainrig.estimate.params import ModelParameters
from trainrig.units import GIB

__all__ = ["local_parameter_counts", "activation_bytes_per_layer", "memory_breakdown_bytes", "memory_fit", "GIB"]



def lora_parameters_per_layer(x: Inputs):
    """Adapter parameters of one layer: rank·(fan_in + fan_out) for every linear (Hu et al. 2021)."""
    q_width = x.n_heads * x.head_dim
    kv_width = x.kv_heads * x.head_dim
    attention = (x.hidden + q_width) * 2 + (x.hidden + kv_width) * 2
    mlp = x.mlp_matrices * (x.hidden + x.ffn_hidden)
    return x.lora_rank * (attention + mlp)


def local_parameter_counts(x: Inputs):
    """Parameters one GPU of the largest pipeline stage holds, before ZeRO sharding.

    Returns (dense, expert, trainable_fraction_dense): dense = everything but routed experts,
    divided by tensor parallelism (norms replicated); experts divided by ep·tp (expert tensor
    parallelism follows tp, as Megatron-Core's default). The first stage also holds the embedding,
    the last the output head; we size the larger of the two.
    """
    layers = x.n_layers / x.pp
    moe_layers = x.n_moe_layers / x.pp
    dense_layers = layers - moe_layers
    per_layer = x.params_attention_per_layer / x.tp + x.params_norms_per_layer
    dense = layers * per_layer + dense_layers * x.params_dense_mlp_per_layer / x.tp
    dense = dense + moe_layers * x.params_moe_shared_per_layer / x.tp
    ends = np.where(x.pp > 1, np.maximum(x.params_embedding, x.params_head), x.params_embedding + x.params_head)
    dense = dense + ends / x.tp + x.params_norms_per_layer / 2  # + the final norm
    experts = moe_layers * x.n_experts * x.params_expert / (x.ep * x.tp)
    return dense, experts


def activation_bytes_per_layer(x: Inputs, recompute_override=None):
    """Activation bytes one layer saves for backward, for one micro-batch on one GPU.

    Korthikanti et al. 2022 §4.1 tensor by tensor, generalized to GQA, gated MLPs, no dropout and
    flash attention: norm inputs, GEMM inputs, Q/K/V, the attention output, the MLP's
    intermediate tensors; without flash attention the a·s² softmax output (+ dropout mask and
    output). Tensors outside the TP region (norm inputs, the inputs of QKV and FC1, dropout masks)
    are replicated across TP ranks unless sequence parallelism splits them.
    """
    recompute = x.recompute if recompute_override is None else recompute_override
    e = x.activation_bytes
    tokens = x.micro_batch * x.seq_len / x.cp
    rep = np.where(x.sequence_parallel_active > 0, x.tp, 1.0)
    kv_width_local = x.head_dim * np.maximum(x.kv_heads / x.tp, 1.0)
    q_width_local = x.n_heads * x.head_dim / x.tp
    # With flash attention there are no scores for selective recompute to drop; it then redoes the
    # cheap elementwise ops instead (torchtitan's op-level policy): the norm outputs (QKV and FC1
    # inputs) and the MLP activation output are not kept.
    op_level = (recompute == 1) & (x.flash_attention > 0)
    norm_outputs = np.where(op_level, 0.0, 2 * e)
    replicated = (2 * e + norm_outputs + 2 * x.dropout) * x.hidden / rep  # norm in/outputs, masks
    attention = e * (q_width_local + 2 * kv_width_local + q_width_local)  # Q, K, V, attention output
    keys = np.minimum(x.seq_len, x.context_len_cap)
    scores = (1 - x.flash_attention) * (e + x.dropout * (1 + e)) * x.n_heads / x.tp * keys
    scores = np.where(recompute >= 1, 0.0, scores)  # selective recompute drops exactly these
    lse = x.flash_attention * 4 * x.n_heads / x.tp  # fp32 log-sum-exp per query and head
    dense_mlp = e * (x.mlp_matrices - op_level) * x.ffn_hidden / x.tp
    moe_mlp = e * (x.top_k * (x.hidden + x.mlp_matrices * x.expert_ffn_hidden)
                   + x.n_shared_experts * x.mlp_matrices * x.shared_ffn_hidden) / x.tp
    moe_fraction = x.n_moe_layers / x.n_layers
    mlp = (1 - moe_fraction) * dense_mlp + moe_fraction * moe_mlp
    full = tokens * (replicated + attention + scores + lse + mlp)
    layer_input = tokens * e * x.hidden / rep  # all that full recompute keeps
    return np.where(recompute == 2, layer_input, full), tokens * (replicated + attention + scores + lse + mlp)


def in_flight_layers(x: Inputs):
    """Layers' worth of activations the busiest (first) pipeline stage holds at its peak."""
    layers_per_stage = x.n_layers / x.pp
    one_f_one_b = layers_per_stage * np.minimum(x.pp, x.micro_batches)
    interleaved = x.n_layers * (1 + (x.pp - 1) / (x.pp * x.vpp))
    return np.where(x.vpp > 1, np.minimum(interleaved, layers_per_stage * x.micro_batches), one_f_one_b)


def logits_bytes(x: Inputs, p: ModelParameters):
    """Last stage: the logits and the loss's fp32 working copies at their peak, split over TP
    (vocab-parallel cross-entropy)."""
    tokens = x.micro_batch * x.seq_len / x.cp
    return tokens * x.vocab / x.tp * p.logits_bytes_per_element


def memory_breakdown_bytes(x: Inputs, p: ModelParameters):
    """Bytes per GPU: dict with weights, gradients, optimizer, activations, other."""
    dense, experts = local_parameter_counts(x)
    shard_dense = x.dp * x.cp
    shard_expert = np.maximum(x.dp * x.cp / x.ep, 1.0)
    full_training = x.method == 0
    # trainable parameters: all (full), or the adapters (LoRA/QLoRA) on this GPU's layers
    adapters = lora_parameters_per_layer(x) * x.n_layers / x.pp / x.tp
    trainable_dense = np.where(full_training, dense, adapters)
    trainable_expert = np.where(full_training, experts, 0.0)

    def sharded(count_dense, count_expert, stage_threshold):
        """Divide by the data-parallel group when the ZeRO stage shards this kind of state."""
        on = x.zero >= stage_threshold
        dense_part = np.where(on, count_dense / shard_dense, count_dense)
        return dense_part + np.where(on, count_expert / shard_expert, count_expert)

    base_weight_bytes = np.where(full_training, x.weight_bytes, x.frozen_weight_bytes)
    weights = base_weight_bytes * sharded(dense, experts, 3)
    adapter_weights = np.where(full_training, 0.0, 4.0 * adapters)  # fp32 adapters (PEFT default)
    # ZeRO-3 / FSDP gathers a layer (and prefetches the next) in full before using it
    layer_params = (dense + experts) / np.maximum(x.n_layers / x.pp, 1.0)
    gathered = np.where(x.zero >= 3, 2 * layer_params * x.weight_bytes, 0.0)
    weights = weights + adapter_weights + gathered
    gradients = x.grad_bytes * sharded(trainable_dense, trainable_expert, 2)
    optimizer = x.optimizer_bytes * sharded(trainable_dense, trainable_expert, 1)
    optimizer = np.where(x.offload > 0, 0.0, optimizer)

    saved, full_layer = activation_bytes_per_layer(x)
    activations = saved * in_flight_layers(x)
    # working set while recomputing/backpropagating one layer (full recompute rebuilds it whole)
    activations = activations + np.where(x.recompute == 2, full_layer, 0.0)
    last_stage = saved * (x.n_layers / x.pp) + logits_bytes(x, p)
    activations = np.where(x.pp > 1, np.maximum(activations, last_stage), activations + logits_bytes(x, p))
    talks = (x.tp * x.pp * x.cp * x.dp) > 1
    other = p.cuda_context_gib * GIB + np.where(talks, p.comm_buffers_gib * GIB, 0.0)
    other = other + p.allocator_overhead_fraction * activations
    return {
        "weights": weights,
        "gradients": gradients,
        "optimizer": optimizer,
        "activations": activations,
        "other": other,
    }


def memory_fit(x: Inputs, p: ModelParameters, breakdown: dict | None = None):
    """(peak bytes per GPU, the GPU's capacity in bytes, whether it fits) — the one fit rule.

    `breakdown`: the parts from `memory_breakdown_bytes`, when the caller has them already."""
    with np.errstate(divide="ignore", invalid="ignore"):
        total = sum((breakdown or memory_breakdown_bytes(x, p)).values())
    capacity = x.memory_gib * GIB
    return total, capacity, total <= capacity
