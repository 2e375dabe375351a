"""Memory per GPU at its peak: what is alive at the end of the forward, at the end of the backward.

Sources: mixed-precision Adam's 16–18 bytes per parameter (Rajbhandari et al. 2020 ZeRO §3;
Megatron-LM `theoretical_memory_usage.py`); activations per layer s·b·h·(34 + 5·a·s/h) bytes and
their division under tensor and sequence parallelism and recomputation (Korthikanti et al. 2022,
Table 2 and §4); the first pipeline stage holds up to p micro-batches under 1F1B and
L·(1 + (p−1)/(p·v)) layers' worth under interleaving (ibid. §4.2.3). Fine-tuning: frozen weights
need no gradients and their linears save no inputs (PyTorch autograd saves a GEMM input only for
the weight's gradient); QLoRA's NF4 storage (Dettmers et al. 2023). At scale (issue 12, docs/model.md
"Memory at scale"): torchtitan's op-level selective recompute set, PyTorch FSDP's fp32 shard as the
master, fp8 all-gather, the reduce-scatter buffers, DDP's buckets, and the blocks the caching
allocator holds but cannot reuse (torchtitan, torch FSDP2 and c10 CUDACachingAllocator sources, cited
at each term). All vectorized over `Inputs`.

The peak is the larger of two moments. At the end of the forward (the start of the backward) the
saved activations and the loss's logits are alive, and gradients only where they outlive a step
(accumulation over micro-batches, a framework's persistent buffer, DDP's buckets). At the end of the
backward every gradient is alive, the activations are gone but for the layer being processed, and
FSDP reduce-scatters that layer's gradients.
"""

from __future__ import annotations

import numpy as np

from trainrig.estimate import mamba, module_recompute, ops
from trainrig.estimate.compute import adapter_widths
from trainrig.estimate.inputs import Inputs
from trainrig.estimate.params import ModelParameters
from trainrig.units import GIB

__all__ = ["local_parameter_counts", "activation_bytes_per_layer", "memory_breakdown_bytes", "memory_fit",
           "memory_state", "stage_kept_gathered", "gathered_bytes_per_weight", "trainable_parameter_counts",
           "lora_parameters_per_layer", "stage_linear_parameters", "GIB"]

PEAK_PHASES = ("forward", "backward")
MEMORY_PARTS = ("weights", "gradients", "optimizer", "activations", "other")  # the peak's parts


def _memoized(function):
    """Remember the last call's answer for the same `Inputs` object: one evaluation asks for the
    parameter counts and activations of one `x` several times (Inputs is immutable, and holding it
    in the memo keeps its identity from being reused)."""
    last: list = [None, None, ()]

    def wrapper(x: Inputs, *more):
        if last[0] is x and (more is last[2] or _identical(more, last[2])):
            return last[1]
        last[0], last[1], last[2] = x, function(x, *more), more
        return last[1]

    wrapper.__doc__, wrapper.__name__ = function.__doc__, function.__name__
    return wrapper


def _identical(a: tuple, b: tuple) -> bool:
    """Same length and the same objects in turn (arrays compare by identity, not by value)."""
    return len(a) == len(b) and all(u is v for u, v in zip(a, b, strict=True))


def lora_parameters_per_layer(x: Inputs):
    """Adapter parameters of one layer: rank·(fan_in + fan_out) for every adapted linear (Hu et al.
    2021). A plain (ungated) MLP has no gate: `gate` then means its first linear, like `up`."""
    q_width = x.n_heads * x.head_dim
    k_width, v_width = x.kv_heads * x.head_dim, x.kv_heads * x.v_head_dim
    attention = (x.lora_q * (x.hidden + q_width) + x.lora_k * (x.hidden + k_width)
                 + x.lora_v * (x.hidden + v_width) + x.lora_o * (x.n_heads * x.v_head_dim + x.hidden))
    if ops.any(x.mla > 0):  # MLA: adapters on its query and key/value linears (Inputs.mla_adapted_widths)
        latent = ops.total(x.mla_adapted_widths()) + x.lora_o * (x.n_heads * x.v_head_dim + x.hidden)
        attention = ops.where(x.mla > 0, latent, attention)
    mlp = _mlp_adapter_widths(x, x.ffn_hidden)
    shared_experts = 0.0
    if ops.any(x.n_moe_layers > 0):  # an MoE layer's own adapters: its shared experts' (the routed ones apart)
        shared_experts = x.n_moe_layers / x.n_layers * x.n_shared_experts * _mlp_adapter_widths(x, x.shared_ffn_hidden)
        mlp = ops.where(x.hybrid > 0, mlp, x.dense_share * mlp)  # the dense MLPs are those of the other layers
    if ops.any(x.hybrid > 0):  # a hybrid's adapters sit in its attention and MLP layers only
        attention, mlp = (ops.where(x.hybrid > 0, share * v, v) for share, v in ((x.attention_share, attention),
                                                                                  (x.mlp_share, mlp)))
    return x.lora_rank * (attention + mlp + shared_experts)


def lora_expert_parameters_per_moe_layer(x: Inputs):
    """Adapter parameters on one MoE layer's routed experts: every expert's MLP linears that the
    targets name, as for a dense MLP of the expert width. PEFT's target_modules match each
    expert's gate_proj/up_proj/down_proj (transformers 4.x: an nn.ModuleList of expert MLPs) and,
    on transformers 5's fused 3-D expert weights, adapt them per expert alike."""
    return x.lora_rank * x.n_experts * _mlp_adapter_widths(x, x.expert_ffn_hidden)


def _mlp_adapter_widths(x: Inputs, width):
    """fan_in + fan_out summed over one MLP's adapted linears, for an MLP of `width` (a plain MLP's
    first linear counts as `gate`, like `up`)."""
    return (x.adapted_first_mlp + x.lora_down) * (x.hidden + width)


@_memoized
def _end_parameters(x: Inputs):
    """Embedding and output head on this GPU's stage, split over TP (the first stage holds the
    embedding, the last the head; we size the larger)."""
    ends = ops.where(x.pp > 1, ops.maximum(x.params_embedding, x.params_head), x.params_embedding + x.params_head)
    return ends / x.tp


@_memoized
def local_parameter_counts(x: Inputs):
    """Parameters one GPU of the largest pipeline stage holds, before ZeRO sharding.

    Returns (dense, expert): dense = everything but routed experts, divided by tensor parallelism
    (norms and MLA's down projections replicated); experts divided by ep·etp (expert tensor
    parallelism follows tp unless `expert_tp` says, as in Megatron-Core).
    """
    layers = x.layers_per_stage
    moe_layers = x.moe_layers_per_stage
    dense_layers = layers - moe_layers
    per_layer = x.params_attention_per_layer / x.tp + x.params_attention_replicated_per_layer + x.params_norms_per_layer
    dense = layers * per_layer + dense_layers * x.params_dense_mlp_per_layer / x.tp
    dense = dense + moe_layers * x.params_moe_shared_per_layer / x.tp
    experts = moe_layers * x.n_experts * x.params_expert / (x.ep * x.etp)
    dense = dense + _stage_end_parameters(x, (dense + experts) / ops.maximum(layers, 1.0))
    dense = dense + x.params_final_norm
    if ops.any(x.mtp_layers > 0):  # one stage: the MTP modules beside everything (else with the head)
        mtp_dense, mtp_experts = _mtp_parameters(x)
        dense, experts = dense + ops.where(x.pp == 1, mtp_dense, 0.0), experts + ops.where(x.pp == 1, mtp_experts, 0.0)
    return dense, experts


def _mtp_parameters(x: Inputs):
    """(dense, expert) parameters of the multi-token prediction modules on one GPU: each one more
    layer like the stage's average, its 2·hidden → hidden projection (split over TP) and three
    norms (DeepSeek-V3 §2.2: on the hidden state, the embedding and the output)."""
    layers, moe = ops.maximum(x.layers_per_stage, 1.0), x.moe_layers_per_stage
    attention = x.params_attention_per_layer / x.tp + x.params_attention_replicated_per_layer
    mlp = ((layers - moe) * x.params_dense_mlp_per_layer + moe * x.params_moe_shared_per_layer) / (layers * x.tp)
    projection = 2 * x.hidden * x.hidden / x.tp + 2.5 * x.params_norms_per_layer  # the layer's 2 norms + 3
    experts = moe / layers * x.n_experts * x.params_expert / (x.ep * x.etp)
    return x.mtp_layers * (attention + mlp + projection), x.mtp_layers * experts


def _stage_end_parameters(x: Inputs, layer_params):
    """Embedding or head on the fullest stage, net of the layer it displaces where it takes a
    pipeline slot: that stage then holds max(L layers, L − 1 layers + the end) (Megatron-Core
    account_for_embedding/loss_in_pipeline_split)."""
    slotted = (x.pp > 1) & (((x.pp_embedding_slot + x.pp_loss_slot) > 0) | (x.pipeline_explicit > 0)
                            | (x.mtp_layers > 0))
    if not ops.any(slotted):
        return _end_parameters(x)
    # the end stages' layer counts relative to the fullest stage's (0 or −1; any for an explicit split)
    first = x.first_stage_layers - x.layers_per_stage
    last = x.end_stage_layers - x.layers_per_stage
    embedding = x.params_embedding / x.tp + first * layer_params
    head = x.params_head / x.tp + last * layer_params
    if ops.any(x.mtp_layers > 0):  # beside the head: the MTP modules and the embedding they read
        head = head + ops.where(x.mtp_layers > 0, ops.total(_mtp_parameters(x)) + x.params_embedding / x.tp, 0.0)
    return ops.where(slotted, ops.maximum(ops.maximum(embedding, head), 0.0), _end_parameters(x))


@_memoized
def trainable_parameter_counts(x: Inputs):
    """(dense, expert) parameters that train on one GPU: all of them (full), or the adapters of its
    layers, plus the embedding and head when they train beside them (LoRA/QLoRA)."""
    dense, experts = local_parameter_counts(x)
    if not ops.any(x.method > 0):  # every row trains every weight
        return dense, experts
    adapters = lora_parameters_per_layer(x) * x.layers_per_stage / x.tp + x.train_embeddings * _end_parameters(x)
    full = x.method == 0
    expert_adapters = 0.0
    if ops.any(x.n_moe_layers > 0):  # the routed experts' adapters, split over the expert group as they are
        expert_adapters = x.moe_layers_per_stage * lora_expert_parameters_per_moe_layer(x) / (x.ep * x.etp)
    return ops.where(full, dense, adapters), ops.where(full, experts, expert_adapters)


def _stage_norm_parameters(x: Inputs):
    """Norm weights of one GPU's stage: each block's (two per transformer layer) and the final one."""
    return x.params_norms_per_layer * x.layers_per_stage + x.params_final_norm


@_memoized
def _stage_linear_parameters(x: Inputs):
    """Weights of the linears of one GPU's layers (what a quantized base stores quantized): all its
    parameters but the embedding, head and norms."""
    dense, experts = local_parameter_counts(x)
    layers = ops.maximum(x.layers_per_stage, 1.0)
    return dense - _stage_end_parameters(x, (dense + experts) / layers) - _stage_norm_parameters(x) + experts


stage_linear_parameters = _stage_linear_parameters


def _frozen_base_bytes(x: Inputs):
    """Bytes of the frozen base of a LoRA/QLoRA job on one GPU: the layers' linears at their storage
    (quantized or 16-bit), norms, embedding and head as the quantizer leaves them: at 16 bits, or
    in fp32 where the stack prepares the quantized model with PEFT (FrameworkSpec.qlora_unquantized_fp32)."""
    unquantized = ops.where(x.train_embeddings > 0, 0.0, _end_parameters(x)) + _stage_norm_parameters(x)
    return _stage_linear_parameters(x) * x.frozen_weight_bytes + unquantized * x.unquantized_weight_bytes


def activation_bytes_per_layer(x: Inputs, recompute_override=None):
    """Activation bytes one layer saves for backward (see `_activation_bytes_per_layer`)."""
    if recompute_override is None:
        return _activations_as_configured(x)
    return _activation_bytes_per_layer(x, recompute_override)


@_memoized
def _activations_as_configured(x: Inputs):
    return _activation_bytes_per_layer(x, None)


def _activation_bytes_per_layer(x: Inputs, recompute_override=None):
    """Activation bytes one layer saves for backward, for one micro-batch on one GPU:
    (saved, the layer's whole set, which a full recompute rebuilds while it backpropagates).

    Korthikanti et al. 2022 §4.1 tensor by tensor, generalized to GQA, gated MLPs, no dropout and
    flash attention: norm inputs, GEMM inputs, Q/K/V, the attention output, the MLP's
    intermediate tensors; without flash attention the a·s² softmax output (+ dropout mask and
    output). Tensors outside the TP region (norm inputs, the inputs of QKV and FC1, dropout masks)
    are replicated across TP ranks unless sequence parallelism splits them. A frozen linear saves
    no input (only its weight's gradient would read it); an adapted one saves it for its adapter,
    copied with a 1-byte mask when the LoRA branch applies dropout.
    """
    recompute = x.recompute if recompute_override is None else recompute_override
    e = x.activation_bytes
    tokens = x.micro_batch_tokens
    rep = x.sequence_shards
    kv_width_local, q_width_local, v_width_local = x.kv_width_local, x.q_width_local, x.v_width_local
    out_local = x.attention_out_local
    full = x.method == 0
    gated = x.mlp_matrices == 3
    # With flash attention there are no scores for selective recompute to drop; the op-level policy
    # redoes the cheap elementwise ops instead: the norm outputs (QKV and FC1 inputs) and the MLP
    # activation output are not kept.
    op_level = op_level_recompute(x, recompute)
    # a linear's input is kept when its weight trains, its adapter reads it, or a quantized
    # linear's backward keeps it anyway
    keeps_input = full | ((x.quantized > 0) & (x.quantized_linear_saves_input > 0))
    attention_in = ops.where(keeps_input, 1.0, ops.maximum(ops.maximum(x.lora_q, x.lora_k), x.lora_v))
    mlp_in = ops.where(keeps_input, 1.0, ops.maximum(x.lora_gate, x.lora_up))
    adapter_copy = ops.where(full, 0.0, x.lora_dropout * (e + 1))  # dropout's output and mask

    saved = x.saved_input_bytes  # 16 bits, or the quantized copy Transformer Engine keeps in fp8/fp4

    def linear_input(saved_for_weights):
        """Bytes per element a linear's input costs: kept for its weight or adapter, and copied when
        the adapter applies dropout."""
        return saved_for_weights * (saved + adapter_copy)

    # eager upcasting norms keep the fp32 input and, when their scale trains, the normalized input
    norm_in = ops.where((x.fused_kernels > 0) | (x.eager_norm_upcast == 0), e, 4.0 + ops.where(full, e, 0.0))
    attention_norm_output, mlp_norm_output = linear_input(attention_in), linear_input(mlp_in)
    norm_outputs = ops.where(op_level, 0.0, attention_norm_output + mlp_norm_output)
    replicated = (2 * norm_in + 2 * x.dropout) * x.hidden / rep + norm_outputs * x.hidden / rep
    qkv = e * (q_width_local + kv_width_local + v_width_local)
    attention = qkv + e * out_local  # Q, K, V and the attention output
    attention = attention + x.fused_qkv_view_saved * e * (q_width_local + kv_width_local)  # whole QKV output kept
    if ops.any(x.mla > 0):
        attention = attention + x.mla * _mla_latent_bytes(x, e, keeps_input)
    # o reads the attention output the kernel keeps; a quantized copy of it beside that where one is kept
    quantized_copy = ops.where(full & (saved < e), saved, 0.0)
    o_input = (ops.where(full, 0.0, x.lora_o * adapter_copy) + quantized_copy) * out_local
    keys = x.attended_keys
    scores = (1 - x.flash_attention) * (e + x.dropout * (1 + e)) * x.n_heads / x.tp * keys
    # selective recompute drops exactly these (where it redoes the attention core: Megatron-Core's core_attn)
    scores = ops.where((recompute == 2) | ((recompute == 1) & (x.redo_core_attn > 0)), 0.0, scores)
    lse = x.flash_attention * 4 * x.n_heads / x.tp  # fp32 log-sum-exp per query and head
    redone_with_kernel = (recompute == 1) & (x.selective_recompute_ops == 0) & (x.redo_core_attn > 0)
    lse = ops.where(redone_with_kernel, 0.0, lse)
    # MLP: the activation's input(s) are always saved (gate and up for SwiGLU, fc1's output
    # otherwise); the down projection's input only for its weight or adapter. Fused kernels
    # recompute SwiGLU's product; eager ones keep silu(gate) as well.
    activation_inputs = ops.where(gated, 2.0, 1.0)
    # (op-level selective recompute redoes elementwise outputs such as this one instead of keeping them)
    eager_keeps = (x.fused_kernels == 0) | (x.swiglu_saves_activation > 0)
    eager_extra = ops.where(gated & eager_keeps & ops.logical_not(op_level), 1.0, 0.0)
    down_input = ops.where(full, 1.0 - op_level, ops.where(keeps_input, 1.0, x.lora_down)
                          + x.lora_down * x.lora_dropout * (1 + 1 / e))
    dense_mlp = (e * (activation_inputs + eager_extra) + saved * down_input) * x.ffn_hidden / x.tp
    # routed and shared experts: the permuted tokens and the down projection's input (kept for the
    # weight gradients, quantized where the framework keeps them so), the first linear's output
    up_outputs = x.mlp_matrices - 1
    shared_set = x.n_shared_experts * (e * up_outputs + saved) * x.shared_ffn_hidden
    moe_mlp = (x.top_k * (saved * x.hidden + (e * up_outputs + saved) * x.expert_ffn_hidden) + shared_set) / x.tp
    moe_fraction = x.n_moe_layers / x.n_layers
    mlp = x.dense_share * dense_mlp + moe_fraction * moe_mlp
    whole = tokens * (replicated + attention + o_input + scores + lse + mlp)
    hybrid = x.hybrid > 0
    if ops.any(hybrid):  # one block per layer, each with its own norm: weighted by the layers' shares
        block_in = (norm_in + x.dropout) * x.hidden / rep  # the block's norm input and residual dropout mask
        linear_in = linear_input(ops.where(keeps_input, 1.0, 0.0))
        mixer_in = linear_in * x.hidden / rep  # in_proj's input
        mixer = block_in + mixer_in + mamba.saved_bytes_per_token(x, e, linear_in)
        attention_block = block_in + attention_norm_output * x.hidden / rep + attention + o_input + scores + lse
        mlp_blocks = (x.mlp_share * (block_in + mlp_norm_output * x.hidden / rep)
                      + x.dense_share * dense_mlp + moe_fraction * moe_mlp)
        layer_set = x.attention_share * attention_block + mlp_blocks + x.mamba_share * mixer
        whole = ops.where(hybrid, tokens * layer_set, whole)
    if ops.any(x.lora_output_dropout > 0):  # dropout on B's outputs keeps their 1-byte masks
        whole = whole + ops.where(full, 0.0, tokens * x.lora_output_dropout * adapter_widths(x)[1])
    layer_input = tokens * e * x.hidden / rep  # all that full recompute keeps
    # torchtitan's op-level selective recompute (parallelize_llama.py `_apply_ac_to_transformer_block`,
    # `selective_ac_option: op`, pytorch/torchtitan@9dec370): inside each block's checkpoint its
    # policy saves the outputs of `_save_list` ops only, recomputing the rest from the block input
    # the checkpoint holds: every odd aten.mm in forward order (q k v o, then w1 w3 w2: q, v, the
    # gate w1 and the down projection w2, whose output before TP's reduce-scatter is hidden wide; a
    # two-matrix MLP: q, v, fc1), the flash-attention kernel's output and log-sum-exp, and TP's
    # reduce-scatter outputs (after o and down, sequence-sharded). Float8Linear's matmuls still reach
    # the policy as aten.mm on fp8 tensor subclasses (torchao float8_linear.py), whose outputs are 16-bit.
    # One linear for q, k and v is the first matmul, kept whole, and o the second; one for gate and
    # up is kept whole, and the down projection after it comes at an even count (q k v o w1w3 w2, or
    # qkv o w1w3 w2), so it is redone: its output is kept only when gate and up are apart.
    kept_projections = ops.where(x.fused_qkv > 0, q_width_local + kv_width_local + v_width_local,
                                 q_width_local + v_width_local)
    down_output = ops.where(gated & (x.fused_gate_up == 0), x.hidden, 0.0)
    first_mlp = ops.where(gated & (x.fused_gate_up > 0), 2.0, 1.0) * x.ffn_hidden / x.tp
    dense_op_mlp = e * (first_mlp + down_output)
    reduce_scattered = ops.where((x.tp > 1) & (x.sequence_parallel_active > 0), 2 * e * x.hidden / x.tp, 0.0)
    op_set = (e * x.hidden / rep + e * (kept_projections + out_local) + lse + reduce_scattered
              + x.dense_share * dense_op_mlp + moe_fraction * moe_mlp)
    whole = ops.where(op_level & full, tokens * op_set, whole)  # (op_level_recompute: not for hybrids)
    kept = whole
    if module_recompute.lists_modules(x):  # Megatron-Core's recompute_modules beside core_attn
        parts = {"mla_qkv": qkv, "attention_norm": attention_norm_output * x.hidden / rep,
                 "mlp_norm": mlp_norm_output * x.hidden / rep, "dense_mlp": dense_mlp, "moe_mlp": moe_mlp,
                 "routed_down": x.top_k * saved * x.expert_ffn_hidden / x.tp, "shared": shared_set / x.tp}
        kept = whole - tokens * module_recompute.dropped_bytes_per_token(x, parts, recompute)
    # full recompute keeps only the layer input of the layers it redoes (recompute_num_layers: its
    # share of the stage), the others keep their whole set
    share = ops.where(recompute == 2, x.full_recompute_share if recompute_override is None else 1.0, 0.0)
    return ops.where(recompute == 2, share * layer_input + (1 - share) * whole, kept), whole


def _mla_latent_bytes(x: Inputs, e, keeps_input):
    """Bytes per token MLA's latents add to a layer's saved set on one GPU: each latent norm's input
    and its output (the up projection's input, kept where that weight trains or a quantized
    linear keeps it); on the down projections' tokens (their sequence shard under sequence
    parallelism), since both latents are narrow and cheaper to keep than to gather again. The
    assembled q and k and the up projection's v are the Q, K, V counted with every attention."""
    latents = x.q_lora_rank + x.kv_lora_rank
    up_inputs = ops.where(keeps_input, 1.0, 0.0)
    return e * latents * (1.0 + up_inputs) * x.mla_down_tokens_share


def op_level_recompute(x: Inputs, recompute=None):
    """Whether selective recompute runs as an op-level policy (FrameworkSpec.selective_recompute
    `ops`, torchtitan's): with flash attention there are no attention scores for Korthikanti's
    selective recompute to drop, so the block keeps a set of op outputs and redoes the rest."""
    recompute = x.recompute if recompute is None else recompute
    # (not in a hybrid: torchtitan's policy is written for its transformer blocks)
    return (recompute == 1) & (x.flash_attention > 0) & (x.selective_recompute_ops > 0) & (x.hybrid == 0)


def _kept_layers(x: Inputs, layers):
    """Layers' worth of saved activations on the GPU when `layers` of them are in flight under
    activation offload: those that do not offload, and at most 2 of those that do (one going out,
    one coming back)."""
    offloaded = layers * x.offloaded_layer_share
    return (layers - offloaded) + ops.minimum(offloaded, 2.0)


def in_flight_layers(x: Inputs):
    """Layers' worth of activations the busiest pipeline stage holds at its peak: the first (1F1B
    keeps min(pp, m) micro-batches in flight on it), or the second where an embedding slot took one
    of the first stage's layers (min(pp − 1, m) in flight); m counts one run of the schedule's
    micro-batches (a step's, unless `pp_local_batch` splits it into runs)."""
    layers_per_stage = x.layers_per_stage
    first = x.first_stage_layers
    m = x.micro_batches / x.pipeline_runs
    one_f_one_b = ops.maximum(first * ops.minimum(x.pp, m), layers_per_stage * ops.minimum(x.pp - 1, m))
    # GPipe runs every micro-batch's forward before the first backward: all of them in flight
    one_f_one_b = ops.where(x.pp_schedule == 1, first * m, one_f_one_b)
    interleaved = x.stage_slots * x.pp * (1 + (x.pp - 1) / (x.pp * x.vpp))
    return ops.where(x.vpp > 1, ops.minimum(interleaved, layers_per_stage * m), one_f_one_b)


@_memoized
def logits_bytes(x: Inputs, p: ModelParameters):
    """Last stage: the logits and the loss's working copies at their peak, split over TP.

    Full cross-entropy keeps 16-bit logits, an fp32 upcast and the fp32 log-softmax at once (all
    16-bit when the loss runs in the training precision: a model cast to 16 bits without autocast
    whose code does not upcast, `loss_upcast: false`); where the code shifts a contiguous copy of
    them (`loss_shift_copy`), the forward's moment with that copy when it is the larger;
    chunked keeps the 16-bit logits of the whole micro-batch (eager: also each chunk's saved
    log-softmax, in the same precision; a compiled loss recomputes it); a fused kernel keeps only the
    16-bit logits and overwrites them with their gradient; a fused linear cross-entropy
    (Liger, Unsloth) never builds the logits, only a chunk of about hidden/vocab of them at a time
    (Liger's chunk size: tokens·hidden/vocab), i.e. ~hidden elements per token."""
    tokens = x.micro_batch_tokens
    chunked = x.activation_bytes * ops.where(x.fused_kernels > 0, 1.0, 2.0)
    # the full loss's three fp32 tensors (log-softmax, its gradient, its input's gradient) are 16-bit
    # when it runs in the training precision (`loss_upcast: false`)
    # (a stack's own loss keeps its own count: framework facts loss_bytes_per_logit, at any TP, and
    # loss_parallel_bytes_per_logit, under TP)
    own = ops.where(x.loss_bytes > 0, x.loss_bytes, p.logits_bytes_per_element)
    per_logit = ops.where((x.tp > 1) & (x.loss_parallel_bytes > 0), x.loss_parallel_bytes, own)
    full = per_logit * (1 - (1 - x.loss_upcast) * (1 - x.activation_bytes / 4))
    # a shifted contiguous copy of the logits (`loss_shift_copy`) is alive only in the forward, beside
    # the 16-bit logits the model still returns, their upcast and the log-softmax: e + 4 + 4 + 4 bytes
    # per logit upcast, 3e in 16 bits. Neither the copy nor the upcast is saved for the backward (a
    # slice's and a cast's gradients need no input), so the peak is that or the backward's, the larger
    copied = ops.where(x.loss_upcast > 0, x.activation_bytes + 12.0, 3 * x.activation_bytes)
    full = full + x.loss_shift_copy * ops.maximum(copied - full, 0.0)
    per_element = ops.where(x.loss_kind == 0, full, ops.where(x.loss_kind == 3, x.activation_bytes, chunked))
    vocab_local = ops.where(x.loss_kind == 2, ops.minimum(x.hidden, x.vocab), x.vocab) / x.tp
    return tokens * vocab_local * per_element


def _freed_logits_block(x: Inputs):
    """Bytes of the 16-bit logits a full, upcast cross-entropy frees before its fp32 tensors need
    room (`loss_fn(pred.float())` then `del pred` in torchtitan's train.py): the caching allocator keeps
    that block reserved, as none of the later requests fits in it."""
    tokens = x.micro_batch_tokens
    upcast = (x.loss_kind == 0) & (x.loss_upcast > 0) & (x.activation_bytes < 4)
    return ops.where(upcast, tokens * x.vocab / x.tp * x.activation_bytes, 0.0)


def memory_state(x: Inputs, p: ModelParameters) -> dict:
    """Every term of the peak, and the peak itself: a dict of arrays (bytes per GPU).

    Keys: `weights`, `optimizer`, `paged`, `gradients_backward`, `gradients_forward`,
    `activations_forward`, `activations_backward`, `allocated`, `phase` (0 forward, 1 backward),
    `reserved`, `device` (what nvidia-smi would show) and the parts at the peak."""
    dense, experts = local_parameter_counts(x)
    trainable_dense, trainable_expert = trainable_parameter_counts(x)
    shard_dense = x.zero_shard  # dp · cp, or the HSDP shard group
    shard_expert = ops.maximum(x.zero_shard * x.tp / (x.ep * x.etp), 1.0)  # the experts' data-parallel ranks
    full = x.method == 0

    def sharded(count_dense, count_expert, on):
        """Divide by the data-parallel group where the ZeRO stage shards this kind of state."""
        return ops.where(on, count_dense / shard_dense + count_expert / shard_expert, count_dense + count_expert)

    # weights: 16-bit copies (full) or the frozen base + adapters (LoRA/QLoRA), ZeRO-3 sharded;
    # ZeRO-3/FSDP gathers a layer (and prefetches the next) in full before using it
    fsdp = x.zero >= 3
    frozen = _frozen_base_bytes(x) / ops.where(fsdp, shard_dense, 1.0) if not ops.all(full) else 0.0
    resident = ops.where(full, x.weight_bytes * sharded(dense, experts, fsdp), frozen)
    adapter_bytes = ops.where(x.master_weights > 0, 4.0, x.weight_bytes)  # PEFT keeps adapters in fp32 under AMP
    # embeddings trained beside LoRA (PEFT `modules_to_save`): a trained copy in the model's
    # precision beside the frozen original, so two 16-bit copies, 16-bit gradients and moments
    ends = ops.where(full, 0.0, x.train_embeddings * _end_parameters(x))
    ends_local = ops.where(fsdp, ends / shard_dense, ends)
    adapters = ops.where(full, 0.0, adapter_bytes * (sharded(trainable_dense, trainable_expert, fsdp) - ends_local)
                        + 2 * x.weight_bytes * ends_local)
    params_offloaded = x.parameters_offloaded
    resident = ops.where(params_offloaded, 0.0, resident)
    layers = ops.maximum(x.layers_per_stage, 1.0)
    layer_params = (dense + experts) / layers
    # a group of one has nothing to gather: FSDP then runs as NO_SHARD ("FSDP is switching to use
    # NO_SHARD ... since the world size is 1", torch/distributed/fsdp/_init_utils.py), so only a
    # kind of weight that is split (or fetched from the host) needs gather buffers
    gathered_dense = ops.where(params_offloaded | (fsdp & (shard_dense > 1)), dense, 0.0)
    gathered_experts = ops.where(params_offloaded | (fsdp & (shard_expert > 1)), experts, 0.0)
    # gathered as stored: a frozen quantized base travels and is held in its storage format
    # (FSDP over bitsandbytes' quant_storage, Answer.AI's FSDP-QLoRA)
    stored = ops.where(full, x.weight_bytes, _frozen_base_bytes(x) / ops.maximum(dense + experts, 1.0))
    # … or, where FSDP keeps a pipeline stage gathered for the whole step, all of its layers
    gathered_layers = ops.where(stage_kept_gathered(x), layers, 2.0)
    gathered = gathered_layers * (gathered_dense + gathered_experts) / layers * stored
    # fp8 all-gather: the layers' linears travel and are held unsharded as 1-byte fp8 weights
    # (torchao WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather casts the shard before the
    # collective); norms stay 16-bit
    fp8_gather = _gathers_in_fp8(x) & (gathered_dense > 0)
    fp8_saved = gathered_layers * _stage_linear_parameters(x) / layers * (x.weight_bytes - 1.0)
    gathered = gathered - ops.where(fp8_gather, fp8_saved, 0.0)
    # PyTorch FSDP keeps no 16-bit shard: the sharded parameter is the fp32 master, cast to 16 bits
    # only into the all-gather (FSDP2 MixedPrecisionPolicy(param_dtype=bf16); torchtitan's
    # apply_fsdp); DeepSpeed's ZeRO-3 keeps a 16-bit partition beside the fp32 one
    off_gpu = x.optimizer_offloaded
    fp32_shard = fsdp & full & (x.master_weights > 0) & (x.zero3_16bit_shard_copy == 0) & (x.offload == 0)
    resident = ops.where(fp32_shard, 4.0 * sharded(dense, experts, fsdp), resident)
    weights = resident + adapters + gathered

    # optimizer states: sharded from ZeRO-1 and on the host when offloaded; a paged optimizer's
    # moments live in unified memory outside the allocator (the fp32 master copy does not)
    trainable_local = sharded(trainable_dense, trainable_expert, x.zero >= 1)
    ends_states = ops.where(x.zero >= 1, ends / shard_dense, ends)
    master_bytes = ops.where((x.master_weights > 0) & full, 4.0, 0.0)
    moments = ((x.optimizer_bytes - master_bytes) * (trainable_local - ends_states)
               + x.embedding_state_bytes * ends_states)
    paged = ops.where(off_gpu, 0.0, x.paged_optimizer * moments)
    # (an fp32 FSDP shard is the master: counted with the weights above)
    optimizer = ops.where(off_gpu, 0.0, ops.where(fp32_shard, 0.0, master_bytes) * trainable_local + moments - paged)

    gradients = _gradient_bytes(x, dense, experts, trainable_dense, trainable_expert, sharded)
    # the trained embedding copies' gradients are in the model's precision, not the adapters' fp32
    ends_grads = ops.where(x.zero >= 2, ends / shard_dense, ends)
    gradients = gradients - ops.where((x.method > 0) & (x.master_weights > 0), (4.0 - x.weight_bytes) * ends_grads, 0.0)
    accumulating = (x.micro_batches > 1) & (x.optimizer_in_backward == 0)
    # DDP (ZeRO-0/1 over a data-parallel group) all-reduces from gradient buckets it allocates once
    # at construction, the size of every gradient (torch/csrc/distributed/c10d/reducer.cpp
    # initialize_buckets: `bucket.gradients = at::empty({offset}, options)`), alive between steps
    ddp_buckets = (x.zero <= 1) & ((x.dp * x.cp) > 1) & (x.optimizer_in_backward == 0)
    gradients_forward = ops.where(accumulating | (x.persistent_grad_buffer > 0) | ddp_buckets, gradients, 0.0)
    # optimizer-in-backward frees each gradient once applied: the largest one alive at a time is a
    # layer's (the next layer's may already be arriving) or the embedding's
    largest = ops.maximum(2 * layer_params, _end_parameters(x))
    share = ops.minimum(largest / ops.maximum(trainable_dense + trainable_expert, 1.0), 1.0)
    gradients_backward = ops.where(x.optimizer_in_backward > 0, gradients * share, gradients)

    saved, _ = activation_bytes_per_layer(x)
    # AutoGPTQ's torch path runs torch.matmul on a dequantized 16-bit weight, which autograd keeps
    # for the input's gradient: a 16-bit copy of every layer whose activations are held
    dequantized = (x.dequant_saved_for_backward * 2.0 * _stage_linear_parameters(x)
                   / ops.maximum(x.layers_per_stage, 1.0))
    saved = saved + (1 - x.full_recompute_share) * dequantized
    in_flight = in_flight_layers(x)
    # offloaded activations: of the layers that offload, only those being moved stay on the GPU (one
    # each way); the others keep theirs (Megatron-Core's cpu_offloading_num_layers)
    stage_saved = ops.where(x.activation_offload > 0, _kept_layers(x, in_flight) * saved, saved * in_flight)
    # the last stage: its layers' and the MTP modules' saved sets, and each loss's logits
    heads = logits_bytes(x, p) * (1 + x.mtp_layers)
    mtp_saved = saved * x.mtp_layers
    last_stage = saved * ops.where(x.activation_offload > 0, _kept_layers(x, x.end_stage_layers), x.end_stage_layers)
    last_stage = last_stage + mtp_saved + heads
    activations_forward = ops.where(x.pp > 1, ops.maximum(stage_saved, last_stage), stage_saved + mtp_saved + heads)
    # end of backward: the layer being backpropagated, whole under any policy: full recompute
    # rebuilds all of it, selective rebuilds the tensors it dropped beside the kept ones for that
    # layer's backward (Korthikanti et al. 2022 §5), no recompute kept it all
    # (the layer's whole set under full recompute with flash attention is the same as without
    # recompute: no scores either way, no op-level policy; one configuration reuses it)
    same_whole = (type(x.recompute) is not np.ndarray and type(x.flash_attention) is not np.ndarray
                  and x.recompute == 2 and x.flash_attention == 1)
    recomputes = ops.any(x.recompute > 0) and not same_whole
    activations_backward = (activation_bytes_per_layer(x, 0.0 if recomputes else None)[1] + dequantized
                            + _layer_gradient_bytes(x))
    # start of a backward: the fullest stage's saved set, its last layer's rebuilt whole in place of
    # that layer's kept part. On one stage the logits have gone by then; under 1F1B the first stage
    # runs that backward with its other in-flight micro-batches still saved (Narayanan et al. 2021
    # §2.2.1: the first stage holds pp micro-batches' activations in its steady state). Counted with
    # the forward's moment, whose reserve (logits block, side-stream blocks) is still held.
    activations_forward = ops.maximum(activations_forward, stage_saved - saved + activations_backward)
    # FSDP's reduce-scatter of a layer: its unsharded gradients in the parameters' dtype and the
    # reduce-scatter input they are copied into in the reduce dtype, both alive at the copy
    # (torch FSDP2 _fsdp_collectives.foreach_reduce: torch.empty(..., dtype=reduce_dtype), then
    # unsharded_grads.clear()); one dtype needs no copy
    reducing = fsdp & full & (gathered_dense > 0) & (x.optimizer_in_backward == 0)
    grad_copy = ops.where(x.grad_bytes != x.weight_bytes, x.grad_bytes, 0.0)
    layer_weights = _stage_linear_parameters(x) / layers + x.params_norms_per_layer  # one layer's, on this GPU
    reduce_buffers = ops.where(reducing, layer_weights * (x.weight_bytes + grad_copy), 0.0)

    # the backward starts at the output head: its weight gradient appears at once (unless it is
    # frozen or already there)
    head_trains = full | (x.train_embeddings > 0)
    head_gradient = ops.where(head_trains & (gradients_forward == 0), x.vocab * x.hidden / x.tp * x.grad_bytes, 0.0)
    head_gradient = ops.where(x.zero >= 2, head_gradient / shard_dense, head_gradient)
    forward = weights + optimizer + gradients_forward + head_gradient + activations_forward
    backward = weights + optimizer + gradients_backward + activations_backward + reduce_buffers
    allocated = ops.maximum(forward, backward)
    phase = ops.where(forward >= backward, 0.0, 1.0)
    # the allocator's reserved peak is the larger moment with its own fragmentation: taking the
    # allocated peak's moment alone would jump up when a smaller gradient set (ZeRO-2) moves the
    # peak from the end of the backward to the activation-heavy end of the forward
    # The full loss's freed 16-bit logits block is held beside that peak: the caching allocator gives
    # a freed block only to a request no larger than it and never merges blocks of two segments
    # (PyTorch docs, "CUDA memory management"; c10/cuda/CUDACachingAllocator.cpp), and what follows
    # the 16-bit logits are fp32 tensors twice their size (the upcast, the log-softmax, its gradients)
    logits_block = _freed_logits_block(x)
    last_stage_peaks = last_stage + logits_block >= stage_saved
    split = ops.where((x.pp == 1) | last_stage_peaks, logits_block, 0.0)
    # FSDP allocates each sharded gradient on its reduce-scatter stream (torch FSDP2
    # _fsdp_collectives.foreach_reduce: `with device_handle.stream(reduce_scatter_stream):
    # reduce_output = ...`; FSDP1 on its post-backward stream) and the caching allocator reuses a
    # block only for the stream it was made on, so once zero_grad frees the gradients their blocks
    # stay reserved through the next forward, out of reach of the compute stream's activations
    # (a group of one reduces nothing: FSDP then runs as NO_SHARD, its gradients from autograd)
    # Where the gradients alive in the forward are an unsharded accumulation (no_sync, a stage kept
    # gathered), the last backward still reduce-scatters them into sharded blocks on that stream.
    side_stream = (x.zero >= 2) & (shard_dense > 1) & (x.optimizer_in_backward == 0)
    reduced = _gradient_bytes(x, dense, experts, trainable_dense, trainable_expert, sharded, reduced=True)
    freed_gradients = ops.where(side_stream & (gradients_forward == 0), gradients,
                                ops.where(side_stream & _accumulates_unsharded(x), reduced, 0.0))
    reserve_forward = p.allocator_overhead_fraction * activations_forward + split + freed_gradients
    reserve_backward = p.allocator_overhead_fraction * activations_backward
    held_forward = forward + reserve_forward
    held_backward = backward + reserve_backward
    held_phase = ops.where(held_forward >= held_backward, 0.0, 1.0)  # the moment the parts describe
    activations = ops.where(held_phase == 0, activations_forward, activations_backward)
    reserve = ops.where(held_phase == 0, reserve_forward, reserve_backward)
    reserved = ops.maximum(held_forward, held_backward)
    talks = (x.tp * x.pp * x.cp * x.dp) > 1
    outside = p.cuda_context_gib * GIB + ops.where(talks, p.comm_buffers_gib * GIB, 0.0)
    return {
        "weights": weights, "optimizer": optimizer, "paged": paged,
        "gradients": ops.where(held_phase == 0, gradients_forward + head_gradient, gradients_backward + reduce_buffers),
        "activations": activations, "other": reserve + outside,
        "allocated": allocated, "reserved": reserved, "device": reserved + outside,
        "phase": phase,
        # what the reserved peak holds in cached free blocks the allocator can release (memory_fit):
        # the forward's logits and side-stream blocks, as far as the backward's moment needs less
        "releasable": reserved - ops.maximum(held_forward - split - freed_gradients, held_backward),
    }


def _layer_gradient_bytes(x: Inputs):
    """The gradients a layer's backward holds beside its saved set: the hidden state's incoming
    gradient and the MLP's input-side gradient (the FC1 output's width, gate and up for a gated
    MLP), which the activation's backward writes while FC1's saved output is still alive and FC1's
    backward GEMM then reads. In a MoE layer the routed tokens' copies through the local experts."""
    tokens = x.micro_batch_tokens
    fc1_width = (x.mlp_matrices - 1) * ops.where(x.n_moe_layers < x.n_layers, x.ffn_hidden / x.tp, 0.0)
    expert_width = ops.where(x.n_moe_layers > 0, x.top_k * (x.mlp_matrices - 1) * x.expert_ffn_hidden / x.etp, 0.0)
    return tokens * x.activation_bytes * (x.hidden / x.sequence_shards + ops.maximum(fc1_width, expert_width))


def _accumulates_unsharded(x: Inputs):
    """FSDP holds the step's gradients unsharded until its last backward: micro-batches inside
    `no_sync()`, or a pipeline stage it keeps gathered."""
    return ((x.zero >= 3) & (x.fsdp_unsharded_accumulation > 0) & (x.micro_batches > 1)) | stage_kept_gathered(x)


def _gradient_bytes(x: Inputs, dense, experts, trainable_dense, trainable_expert, sharded, reduced=False):
    """All gradients on one GPU at the end of a backward. ZeRO-2/3 shard them, except where FSDP
    accumulates micro-batches unsharded (`no_sync`; `reduced`: the sharded gradients its last
    backward reduce-scatters them into); where FSDP puts frozen and trainable weights in one flat
    parameter, every weight gets a gradient, in the weights' precision."""
    fsdp = x.zero >= 3
    all_weights = fsdp & (x.method > 0) & (x.fsdp_frozen_params_get_grads > 0)
    count_dense = ops.where(all_weights, dense, trainable_dense)
    count_expert = ops.where(all_weights, experts, trainable_expert)
    element = ops.where(all_weights, x.weight_bytes, x.grad_bytes)
    # frozen LoRA weights carry no gradient but the adapters do, in their own (fp32 under AMP) dtype
    adapters_only = (x.method > 0) & ops.logical_not(all_weights)
    element = ops.where(adapters_only, ops.where(x.master_weights > 0, 4.0, x.weight_bytes), element)
    unsharded = False if reduced else _accumulates_unsharded(x)
    grads = element * sharded(count_dense, count_expert, (x.zero >= 2) & ops.logical_not(unsharded))
    # ZeRO-Offload keeps only the 16-bit gradients the GPU produces; fp32 ones live on the host,
    # and with ZeRO-2/3 each reduced partition leaves for the host at once (a couple of layers' worth)
    offloaded = x.optimizer_offloaded
    in_buckets = ops.minimum(grads, 2 * grads / ops.maximum(x.layers_per_stage, 1.0))
    return ops.where(offloaded, ops.where(x.zero >= 2, in_buckets, grads) * x.weight_bytes / element, grads)


def gathered_bytes_per_weight(x: Inputs):
    """Bytes per weight a ZeRO-3/FSDP all-gather moves: the training precision's 16 bits, or with fp8
    all-gather 1 byte for the layers' linears, whose shards are cast to fp8 before the collective
    (torchao `WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather`), norms, embedding and head still
    16-bit: the byte-weighted mean over this GPU's weights (what memory_state holds gathered, too)."""
    dense, experts = local_parameter_counts(x)
    linear_share = _stage_linear_parameters(x) / ops.maximum(dense + experts, 1.0)
    return ops.where(_gathers_in_fp8(x), x.weight_bytes - (x.weight_bytes - 1.0) * linear_share, x.weight_bytes)


def _gathers_in_fp8(x: Inputs):
    """fp8 all-gather in effect: asked for, an fp8 run, and every weight trained (fp8 linears)."""
    return (x.fp8_all_gather > 0) & (x.fp8 > 0) & (x.method == 0)


def stage_kept_gathered(x: Inputs):
    """FSDP under pipeline parallelism in a framework that keeps each stage's weights gathered and
    its gradients unsharded until the step's last backward (FrameworkSpec.fsdp_unsharded_under_pp)."""
    return (x.zero >= 3) & (x.pp > 1) & (x.fsdp_unsharded_under_pp > 0)


def memory_breakdown_bytes(x: Inputs, p: ModelParameters):
    """Bytes per GPU at the peak: dict with weights, gradients, optimizer, activations, other."""
    state = memory_state(x, p)
    return {k: state[k] for k in MEMORY_PARTS}


def memory_fit(x: Inputs, p: ModelParameters, state: dict | None = None):
    """(peak bytes per GPU as the device sees it, the GPU's capacity in bytes, whether it fits) — the
    one fit rule: it fits when the peak, less the cached free blocks the allocator can give back,
    leaves `fit_headroom_fraction` of the memory free. When a cudaMalloc fails, PyTorch's caching
    allocator frees every cached block that is free and unsplit and retries
    (c10/cuda/CUDACachingAllocator.cpp, release_cached_blocks; counted in num_alloc_retries), so
    those blocks raise the reserved peak a roomy GPU reports but never cause an out-of-memory.

    `state`: `memory_state(x, p)`, when the caller has it already."""
    state = state or memory_state(x, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        total = sum(state[k] for k in MEMORY_PARTS)
    capacity = x.memory_gib * GIB
    return total, capacity, total - state["releasable"] <= capacity * (1 - p.fit_headroom_fraction)
