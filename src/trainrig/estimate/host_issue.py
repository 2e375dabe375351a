"""The host side of one micro-batch: the kernels and eager ops each layer issues, what issuing them
costs on the host, and how that cost overlaps the GPU's own time (core._micro_batch).

Every kernel costs `kernel_launch_us` of host time and every small eager op `eager_op_host_us`;
the host issues while the GPU runs earlier kernels, so a pass takes the `host_gpu_overlap_exponent`
norm of the two totals (`overlapped_s`), and processes that outnumber a node's cores share them.
"""

from __future__ import annotations

from trainrig.estimate import mamba, module_recompute, op_level, ops
from trainrig.estimate.compute import eager_elementwise_scale, eager_softmax
from trainrig.estimate.inputs import Inputs
from trainrig.estimate.memory import op_level_recompute
from trainrig.estimate.params import ModelParameters

__all__ = ["host_issue_s", "core_sharing", "issuing_share", "overlapped_s", "any_graphs", "ungraphed"]


def host_issue_s(x: Inputs, p: ModelParameters):
    """Host time to issue one micro-batch's kernels on one GPU: (forward, backward + recompute)."""
    forward_kernels, backward_kernels = _kernels_per_layer(x, p)
    forward_ops, backward_ops = _small_ops_per_layer(x, p)
    if any_graphs(x):  # a layer's captured kernels and ops replay in one launch per pass
        eager, replays = _layer_graphs(x, forward_kernels)
        forward_kernels, backward_kernels = forward_kernels * eager + replays, backward_kernels * eager + replays
        forward_ops, backward_ops = forward_ops * eager, backward_ops * eager
    if ops.any(x.n_moe_layers > 0):  # an MoE layer's router and dispatcher ops (a dense model has none)
        moe_fwd, moe_bwd = _moe_small_ops(x)
        forward_ops, backward_ops = forward_ops + moe_fwd, backward_ops + moe_bwd
    layers = x.layers_per_stage
    fetch_fwd, fetch_bwd = _zero3_fetch_s(x, p)
    dtensor_fwd, dtensor_bwd = _dtensor_host_s(x, p)
    # + embedding, logits and loss: ~8 kernels forward, ~12 backward
    forward = ops.total(((layers * forward_kernels + 8) * x.kernel_launch_us * 1e-6,
                         layers * forward_ops * p.eager_op_host_us * 1e-6, fetch_fwd, dtensor_fwd))
    backward = ops.total(((layers * backward_kernels + 12) * x.kernel_launch_us * 1e-6,
                          layers * backward_ops * p.eager_op_host_us * 1e-6, fetch_bwd, dtensor_bwd))
    if not ops.any(x.graph_full > 0):
        return forward, backward
    # one graph launches every micro-batch's forward and backward: one launch per step
    whole = x.kernel_launch_us * 1e-6 / x.micro_batches
    return ops.where(x.graph_full > 0, whole, forward), ops.where(x.graph_full > 0, 0.0, backward)


GRAPH_FIELDS = ("graph_full", "graph_attention", "graph_mlp", "graph_moe", "graph_router")


def any_graphs(x: Inputs) -> bool:
    """Whether any row captures CUDA graphs (TrainingSpec.cuda_graph_scope)."""
    return any(bool(ops.any(getattr(x, name) > 0)) for name in GRAPH_FIELDS)


def ungraphed(x: Inputs) -> Inputs:
    """The same rows with every kernel launched from the host."""
    return x.with_values(**{name: 0.0 * getattr(x, name) for name in GRAPH_FIELDS})


def _layer_graphs(x: Inputs, forward_kernels):
    """(share of a layer's kernels and ops left eager, graph launches per layer and pass) under
    per-layer CUDA graphs, averaged over the stage's dense and MoE layers. The attention block is
    the layer's q/k/v and output linears, attention, input norm, rotary, residual add (MLA's latent
    norms and concatenations) and half its TP collectives; the MLP block the rest of a dense layer;
    an MoE block that and the 8 MoE kernels (see _kernels_per_layer); `moe_router` its norm, router
    GEMM and top-k (its metadata, `moe_preprocess`, is not counted apart). Megatron-Core captures a
    layer's listed blocks as one graph (TECudaGraphHelper: one callable per layer), replayed once in
    the forward and once, as its own graph, in the backward; the backward's captured share is taken
    as the forward's."""
    moe = x.n_moe_layers / x.n_layers
    collectives = _tp_collective_kernels(x) / 2  # the attention block's half, and the MLP block's
    attention = (x.qkv_linears + 1 + _attention_core_kernels(x) + 2 + 2 * x.rope + collectives
                 + _mla_kernels(x))
    mlp = x.mlp_input_linears + 1 + 3 + collectives  # norm, activation, residual add
    captured = (x.graph_attention * attention + x.dense_share * x.graph_mlp * mlp
                + moe * (x.graph_moe * (mlp + MOE_KERNELS) + x.graph_router * 3.0))
    dense_graph = ops.maximum(x.graph_attention, x.graph_mlp)
    moe_graph = ops.maximum(ops.maximum(x.graph_attention, x.graph_moe), x.graph_router)
    replays = x.dense_share * dense_graph + moe * moe_graph
    # Megatron-Core captures per-layer graphs only without full recompute (a planner's rows may try
    # it; a job file that asks for both is refused, specs/job.py)
    captured, replays = (ops.where(x.recompute == 2, 0.0, v) for v in (captured, replays))
    return ops.maximum(1 - captured / forward_kernels, 0.0), replays


def core_sharing(x: Inputs, host, gpu):
    """How much longer kernel issue takes when a node's training processes outnumber its cores: each
    process keeps a core busy for its issuing share of the pass (all of it when launch-bound), and a
    fair-share scheduler stretches every process's issue by demand / cores once the demand exceeds
    the cores. 1 with enough cores or an unknown count."""
    cores = x.cpu_cores_per_node
    if not ops.any(ops.isfinite(cores)):  # no row knows its cores (NaN): nothing to share
        return 1.0
    demand = x.gpus_per_node * issuing_share(host, gpu)
    return ops.where(ops.isfinite(cores) & (demand > cores), demand / ops.where(cores > 0, cores, 1.0), 1.0)


def issuing_share(host, gpu):
    """Share of its time a training process keeps a core busy issuing kernels: host / GPU time, all of
    it when launch-bound (or the GPU does no work)."""
    return ops.minimum(1.0, ops.divide(host, gpu, default=1.0))


def _zero3_fetch_s(x: Inputs, p: ModelParameters):
    """ZeRO-3's host work per module with parameters and pass (forward, the recompute's forward, the
    backward): the framework's `zero3_module_fetch_us` per module — the layer's 2 norms, its attention
    and MLP linears, and each adapter's two small linears. Sharded over more than one rank, each
    gathered parameter (the linears and adapters; norms stay gathered under the persistence
    threshold) also costs `zero3_gather_host_ops` ops at `eager_op_host_us` per gather, twice a
    micro-batch: the forward, and the backward (which, under full recompute, reuses the recomputed
    forward's gather)."""
    gathered = x.layers_per_stage * (x.linears_per_layer + 2 * x.adapted_linears)
    modules = gathered + x.blocks_per_layer * x.layers_per_stage  # and the norms (2 per transformer layer)
    per_pass = ops.where(x.zero >= 3, modules * x.zero3_module_fetch_us * 1e-6, 0.0)
    sharded = (x.zero >= 3) & (x.zero_shard > 1)
    gather = ops.where(sharded, gathered * x.zero3_gather_host_ops * p.eager_op_host_us * 1e-6, 0.0)
    return per_pass + gather, per_pass * (1 + x.full_recompute_share) + gather


# DTensor host work of a sharded linear's backward over its forward's, of an adapter's and of sequence
# parallelism's: 418–463 against 286–307 µs, 556–599 against 416–461, 1215–1345 against 645–738
# (`python benchmarks/dtensor_host_time.py`, torch 2.13)
DTENSOR_LINEAR_BACKWARD_PER_FORWARD = 1.45
DTENSOR_ADAPTER_BACKWARD_PER_FORWARD = 1.3
DTENSOR_SEQUENCE_PARALLEL_BACKWARD_PER_FORWARD = 1.8


def _dtensor_host_s(x: Inputs, p: ModelParameters):
    """Host time eager DTensor tensor parallelism adds to one micro-batch on one stage: (forward,
    backward + full recompute's forward again). Every linear of a layer is sharded (q/k/v and the
    MLP's input linears column-wise, the output and down projections row-wise, as torchtitan's and
    AutoModel's plans), each costing `dtensor_linear_host_us` per forward, each adapter on them
    `dtensor_adapter_host_us`, and sequence parallelism `dtensor_sequence_parallel_host_us` per layer.
    None under torch.compile, or PyTorch's async TP, which compiles."""
    async_tp = x.tp_overlap_micro_pipeline * x.tp_comm_overlap
    eager = (x.tp_dtensor_eager > 0) & (x.tp > 1) & (async_tp == 0)
    if not ops.any(eager):
        return 0.0, 0.0
    parts_us = (x.linears_per_layer * p.dtensor_linear_host_us, x.adapted_linears * p.dtensor_adapter_host_us,
                x.sequence_parallel_active * p.dtensor_sequence_parallel_host_us)
    ratios = (DTENSOR_LINEAR_BACKWARD_PER_FORWARD, DTENSOR_ADAPTER_BACKWARD_PER_FORWARD,
              DTENSOR_SEQUENCE_PARALLEL_BACKWARD_PER_FORWARD)
    forward = ops.where(eager, x.layers_per_stage * sum(parts_us) * 1e-6, 0.0)
    backward_us = sum(ratio * part for ratio, part in zip(ratios, parts_us, strict=True))
    backward = ops.where(eager, x.layers_per_stage * backward_us * 1e-6, 0.0)
    return forward, backward + ops.where(x.recompute == 2, x.full_recompute_share * forward, 0.0)


def overlapped_s(host, gpu, exponent: float):
    """Time of a pass whose kernels the host issues while the GPU runs earlier ones: the
    `exponent`-norm of the two totals (∞ = the slower side alone, 1 = no overlap at all)."""
    slower, faster = ops.maximum(host, gpu), ops.minimum(host, gpu)
    ratio = ops.divide(faster, slower, default=0.0)
    return slower * (1 + ratio ** exponent) ** (1 / exponent)


def _kernels_per_layer(x: Inputs, p: ModelParameters):
    """Kernels one layer launches per micro-batch from its modules: (forward, backward + recomputation).

    Forward: 2 norms, one GEMM per linear (`linears_per_layer`: 4 with q/k/v and gate/up fused, 7
    apart), rotary (q and k), attention (1 fused kernel; unfused: 2 batched GEMMs, softmax, dropout;
    an eager softmax is 4 more: upcast, scale, mask, downcast), 2 residual adds, the activation, and
    the TP collectives (2, or 4 with sequence parallelism). Backward: every forward kernel's
    gradient, plus a weight-gradient GEMM per linear whose weight trains (none on a frozen LoRA
    base; the attention GEMMs have 2 gradient GEMMs each). Each costs `kernel_launch_us` of host
    time; the extra small ops of eager code and of adapters are counted apart (`_small_ops_per_layer`).
    """
    attention = _attention_core_kernels(x)
    tp_collectives = _tp_collective_kernels(x)
    moe = MOE_KERNELS * x.n_moe_layers / x.n_layers
    elementwise = _elementwise_kernels(x)
    linears = x.linears_per_layer
    forward = linears + attention + elementwise + tp_collectives + moe
    weight_grads = ops.where(x.method == 0, linears, 0.0)
    backward = forward + weight_grads + ops.where(x.flash_attention > 0, 1.0, 2.0)
    modules = x.redo_core_attn * attention  # the attention core again, and the modules listed beside it
    if module_recompute.lists_modules(x):
        modules = modules + module_recompute.redone_kernels(x)
    selective = ops.where(op_level_recompute(x), op_level.redone_kernels(x), modules)
    if ops.any(x.hybrid > 0):
        hybrid = _hybrid_kernels(x, attention, tp_collectives, selective)
        forward, backward, selective = (ops.where(x.hybrid > 0, h, t) for h, t in zip(
            hybrid, (forward, backward, selective), strict=True))
    # an early-stopping checkpoint skips the dense MLP's down projection and the residual add after it
    full = x.full_recompute_share * (forward - x.checkpoint_early_stop * 2 * x.dense_share)
    recompute = ops.where(x.recompute == 2, full, ops.where(x.recompute == 1, selective, 0.0))
    return forward, backward + recompute


def _hybrid_kernels(x: Inputs, attention, tp_collectives, selective):
    """`_kernels_per_layer` for a hybrid, one block per layer weighted by its share: each block its
    norm, residual add and half a transformer layer's TP collectives; attention its linears, core
    and rotary; an MLP its linears and activation (an MoE one the MoE kernels); a Mamba-2 mixer its
    two linears and its scan's kernels (mamba.py). Returns (forward, backward, selective)."""
    block = 2.0 + tp_collectives / 2
    attention_block = x.qkv_linears + 1 + attention + 2 * x.rope + _mla_kernels(x) + block
    mlp_block = x.mlp_input_linears + 1 + 1 + block
    mixer = 2 + mamba.FORWARD_KERNELS + block
    moe = MOE_KERNELS * x.n_moe_layers / x.n_layers
    forward = x.attention_share * attention_block + x.mlp_share * mlp_block + moe + x.mamba_share * mixer
    weight_grads = ops.where(x.method == 0, x.linears_per_layer, 0.0)
    backward = (forward + weight_grads + x.attention_share * ops.where(x.flash_attention > 0, 1.0, 2.0)
                + x.mamba_share * (mamba.BACKWARD_KERNELS - mamba.FORWARD_KERNELS))
    return forward, backward, x.attention_share * selective


def _elementwise_kernels(x: Inputs):
    """Fused elementwise kernels of one layer's forward: 2 norms, rotary on q and k, 2 residual adds,
    the activation; MLA adds its latent norms (1, or 2 with a query latent) and the 2
    concatenations that assemble q and k."""
    base = 2 + 2 * x.rope + 2 + 1
    if not ops.any(x.mla > 0):
        return base
    return base + _mla_kernels(x)


# an MoE layer's own kernels: router GEMM, top-k, permute, unpermute, grouped GEMMs
MOE_KERNELS = 8.0


def _attention_core_kernels(x: Inputs):
    """The attention core's forward kernels: 1 fused; unfused, 2 batched GEMMs, softmax, dropout,
    and an eager softmax's 4 more (upcast, scale, mask, downcast)."""
    return ops.where(x.flash_attention > 0, 1.0, 3.0 + x.dropout + 4.0 * eager_softmax(x))


def _tp_collective_kernels(x: Inputs):
    """A layer's forward TP collectives: 2 all-reduces, or 4 with sequence parallelism."""
    return ops.where(x.tp > 1, 2.0 * (1 + x.sequence_parallel_active), 0.0)


def _mla_kernels(x: Inputs):
    """MLA's extra elementwise kernels: its latent norms (1, or 2 with a query latent) and the 2
    concatenations that assemble q and k; 0 without MLA."""
    return x.mla * (3.0 + (x.q_lora_rank > 0))


def _small_ops_per_layer(x: Inputs, p: ModelParameters):
    """Small eager ops one layer adds per micro-batch: (forward, backward + recomputation).

    Eager elementwise work (norms, rotary, residual adds, activation) takes
    `eager_elementwise_factor` ops per fused kernel, the extra ones issued by the same module; each
    adapter costs its stack's measured `lora_forward_ops` / `lora_backward_ops` (PEFT, torchtune), else
    its two small GEMMs and the scaled add (+ dropout), backward twice that.
    A quantized base adds its dequantization ops per linear and use. These are single aten ops
    inside a module's forward, each costing `eager_op_host_us`.
    """
    extra = _elementwise_kernels(x) * (eager_elementwise_scale(x, p) - 1)
    adapters = x.adapted_linears * x.lora_forward_ops
    # a quantized base's dequantization around each of the layer's linears, every use
    dequant = x.quantized * x.dequant_ops * x.linears_per_layer
    forward = extra + adapters + dequant
    recompute = ops.where(x.recompute == 2, x.full_recompute_share * forward,
                          ops.where(op_level_recompute(x), extra, 0.0))
    backward = (extra + x.adapted_linears * x.lora_backward_ops + dequant * (1 - x.dequant_saved_for_backward)
                + recompute)
    return forward, backward


def _moe_small_ops(x: Inputs):
    """An MoE layer's small ops beyond MOE_KERNELS per micro-batch, averaged over the stage's
    layers: (forward, backward + full recomputation's forward again). The router's (captured by the
    `moe_router` or `moe` graph scope), the dispatcher's and, per local expert, the grouped GEMMs'
    launches and casts (captured by `moe`) (FrameworkSpec moe_router_host_ops, moe_layer_host_ops,
    moe_expert_host_ops)."""
    # no per-layer graphs under full recompute (as _layer_graphs)
    router_graph, moe_graph = (ops.where(x.recompute == 2, 0.0, g) for g in (x.graph_router, x.graph_moe))
    router_left, rest_left = 1 - ops.maximum(router_graph, moe_graph), 1 - moe_graph
    share = x.n_moe_layers / x.n_layers
    forward = share * (router_left * x.moe_router_ops_fwd
                       + rest_left * (x.moe_layer_ops_fwd + x.local_experts * x.moe_expert_ops_fwd))
    backward = share * (router_left * x.moe_router_ops_bwd
                        + rest_left * (x.moe_layer_ops_bwd + x.local_experts * x.moe_expert_ops_bwd))
    return forward, backward + ops.where(x.recompute == 2, x.full_recompute_share * forward, 0.0)
