"""Parallelism traffic of one step: tensor-, context-, expert- and pipeline-parallel traffic on
one micro-batch's critical path, and the exposed part of data-parallel traffic (gradient
reduction, ZeRO's gathers) per step. Collective times come from collectives.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainrig.estimate import collectives as comm
from trainrig.estimate import host_issue, module_recompute, op_level, ops
from trainrig.estimate.flops import attention_projection_weights
from trainrig.estimate.inputs import Inputs
from trainrig.estimate.memory import (
    gathered_bytes_per_weight,
    local_parameter_counts,
    op_level_recompute,
    stage_kept_gathered,
    trainable_parameter_counts,
)
from trainrig.estimate.params import ModelParameters

__all__ = ["tensor_parallel_s", "context_parallel_exposed_s", "expert_parallel_s", "pipeline_comm_s",
           "data_parallel_exposed_s"]


def tensor_parallel_s(x: Inputs, p: ModelParameters, tokens, layers, gemm):
    """Megatron TP: 2 all-reduces of the layer's activations forward, 2 backward, 2 more when the
    forward is recomputed (Shoeybi et al. 2019 Fig. 4); with sequence parallelism each becomes an
    all-gather + reduce-scatter pair of the same total traffic (Korthikanti et al. 2022 §4.2.2).
    With `tp_comm_overlap` each of those collectives runs chunked beside a GEMM
    (`_tensor_parallel_overlapped_s`)."""
    if not ops.any(x.tp > 1):  # a group of one moves nothing
        return 0.0
    group = comm.GroupLinks(x.tp, 1.0, x, p)
    nbytes = tokens * x.hidden * x.activation_bytes
    per_allreduce = comm.allreduce_time_s(nbytes, group)
    # full recompute repeats the forward's 2 (all-reduce units); an early-stopping checkpoint skips
    # the one after the down projection (its reduce-scatter half under sequence parallelism)
    skipped = x.checkpoint_early_stop * ops.where(x.sequence_parallel_active > 0, 0.5, 1.0)
    if ops.any(x.hybrid > 0):  # the early stop skips a dense MLP's unit: only in a hybrid's MLP layers
        skipped = ops.where(x.hybrid > 0, skipped * x.dense_share, skipped)
    # an all-reduce unit per block and pass: 2 per transformer layer, 1 per hybrid layer
    blocks = x.blocks_per_layer
    count = 2 * blocks + x.full_recompute_share * (blocks - skipped) + op_level.redone_tp_units(x)
    if module_recompute.lists_modules(x):  # a recomputed MLP or MoE layer gathers and scatters again
        count = count + module_recompute.redone_tp_units(x)
    if ops.any(x.mla > 0):  # MLA gathers its narrow latents, not the hidden state, before attention
        narrower = _mla_gather_saving(x)
        count = count - (2 + x.full_recompute_share) * narrower
    exposed = layers * count * per_allreduce
    if ops.any((x.etp == 1) & (x.n_moe_layers > 0)):
        exposed = exposed - _folded_expert_tp_saving(x, layers) * per_allreduce
    if not ops.any(x.tp_comm_overlap > 0):
        return exposed
    overlapped = layers * _tensor_parallel_overlapped_s(x, p, nbytes, group, gemm)
    if ops.any(x.hybrid > 0):
        overlapped = ops.where(x.hybrid > 0, layers * _hybrid_overlapped_s(x, p, nbytes, group, gemm), overlapped)
    return ops.where((x.tp_comm_overlap > 0) & (x.tp > 1), overlapped, exposed)


def _hybrid_overlapped_s(x: Inputs, p: ModelParameters, nbytes, group, gemm):
    """`_tensor_parallel_overlapped_s` for a hybrid's layers, one block each: every block gathers
    before its input linear and reduce-scatters after its output linear, as attention does
    (Mamba-2's in_proj and out_proj, the MLP's FC1 and FC2), weighted by its share of the layers;
    an MLP block is the layers' average of dense and MoE. Op-level and module recompute are not
    counted here."""
    moe = x.n_moe_layers / x.n_layers
    mlp = [ops.divide(x.dense_share * gemm["dense_mlp"][i] + moe * gemm["moe_mlp"][i], x.mlp_share, default=0.0)
           for i in (0, 1)]
    qkv_share, fc1_share = _input_linear_shares(x)
    blocks = ((x.attention_share, gemm["attention"], qkv_share),
              (x.mlp_share, mlp, fc1_share),
              (x.mamba_share, gemm["mamba_linears"],
               x.mamba_in_width / ops.maximum(x.mamba_in_width + x.mamba_inner, 1.0)))
    tools = _overlap_tools(x, p, nbytes, group)
    return ops.total(share * _block_overlapped_s(x, tools, times[0], times[1], in_share)
                     for share, times, in_share in blocks)


def _input_linear_shares(x: Inputs):
    """The input linear's share of a block's GEMM FLOPs: QKV against proj (MLA's replicated down
    projections counted as if split: their share is small), FC1 against FC2."""
    qkv_share = 1 - x.n_heads * x.v_head_dim * x.hidden / attention_projection_weights(x)
    up = x.mlp_matrices - 1
    return qkv_share, up / (up + 1)


def _weight_gradient_share(x: Inputs):
    """A backward's weight-gradient half (equal FLOPs to the input gradient); frozen bases compute
    no weight gradient."""
    return ops.where(x.method == 0, 0.5, 0.0)


def _overlap_tools(x: Inputs, p: ModelParameters, nbytes, group):
    """The three ways a TP collective runs beside a GEMM (see _tensor_parallel_overlapped_s):
    ring exchange, pipelined reduce-scatter and bulk."""
    gather = comm.all_gather_time_s(nbytes, group)  # a reduce-scatter of the same bytes takes as long
    n, splits = x.tp, p.tp_overlap_rs_splits
    sm_share = ops.minimum(p.tp_overlap_comm_sms / x.compute_units, 0.5)
    piece = comm.reduce_scatter_time_s(nbytes / splits, group)

    def ring(gemm_s):
        return ops.maximum(gather - gemm_s * (n - 1) / n, 0.0)

    def pipelined(gemm_s):
        slowed = gemm_s / (1 - sm_share)
        return piece + (splits - 1) * ops.maximum(piece - slowed / splits, 0.0) + (slowed - gemm_s)

    def bulk(gemm_s):
        return _beside_s(gather, gemm_s, sm_share)

    return ring, pipelined, bulk


def _block_overlapped_s(x: Inputs, tools, forward_s, backward_s, in_share):
    """One block's overlapped TP traffic, forward, backward and a full recompute's forward again:
    `in_share` of its GEMM time is the input linear's."""
    ring, pipelined, bulk = tools
    wgrad_share = _weight_gradient_share(x)
    forward = ring(forward_s * in_share) + pipelined(forward_s * (1 - in_share))
    backward = ring(backward_s * (1 - in_share) * (1 - wgrad_share)) + bulk(backward_s * in_share * wgrad_share)
    return forward + backward + ops.where(x.recompute == 2, x.full_recompute_share * forward, 0.0)


def _folded_expert_tp_saving(x: Inputs, layers):
    """All-reduce units the MoE layers of a stage skip when their experts have no tensor
    parallelism (expert_tp 1) and no shared expert: the router and the dispatch take each rank's
    sequence-parallel tokens as they are, so no all-gather precedes the MLP and no reduce-scatter
    follows it (Megatron-Core's MoE layer; one unit per pass). A shared expert is a TP MLP and
    still gathers and scatters."""
    folded = (x.etp == 1) & (x.n_shared_experts == 0) & (x.tp > 1)
    moe_layers = layers * x.n_moe_layers / x.n_layers
    return ops.where(folded, moe_layers * (2 + x.full_recompute_share), 0.0)


def _mla_gather_saving(x: Inputs):
    """All-reduce units per pass MLA saves under sequence parallelism: Megatron-Core runs the
    replicated down projections on each rank's sequence shard and all-gathers their outputs (the
    query latent, or the hidden state when queries have no latent, and the key/value latent with
    the rotary key) instead of the hidden state before q/k/v (multi_latent_attention.py
    get_query_key_value_tensors); that all-gather is half an all-reduce unit, its backward
    reduce-scatter the other half."""
    gathered = ops.where(x.q_lora_rank > 0, x.q_lora_rank, x.hidden) + x.kv_lora_rank + x.rope_head_dim
    active = (x.mla > 0) & (x.sequence_parallel_active > 0)
    return ops.where(active, 0.5 * (1 - gathered / x.hidden), 0.0)


def _tensor_parallel_overlapped_s(x: Inputs, p: ModelParameters, nbytes, group, gemm):
    """One layer's TP traffic on the critical path when each collective runs beside a GEMM, as
    Transformer Engine's userbuffers do for Megatron-Core `--tp-comm-overlap` (and torchtitan's
    async TP, by micro-pipelining; Wang et al. 2023, ASPLOS, decompose the same way):

    * ring exchange — the all-gathers before the QKV and FC1 GEMMs (forward) and of the output
      gradient before the proj and FC2 input-gradient GEMMs (backward): the GEMM runs on the chunk
      it has while the next of tp chunks arrives over copy engines, so only
      max(0, C − G·(tp−1)/tp) shows;
    * pipelined — the reduce-scatters after the proj and FC2 GEMMs (forward): the GEMM runs in
      `tp_overlap_rs_splits` pieces, each piece's reduce-scatter beside the next piece; the last
      piece's reduce-scatter never hides, and the GEMM runs on the SMs the communication kernel
      leaves (`tp_overlap_comm_sms`, TE's `set_sm_margin`);
    * bulk — the reduce-scatters of the QKV and FC1 input gradients (backward), beside their
      weight-gradient GEMMs: what outlasts that GEMM shows, and the GEMM loses the communication
      kernel's SMs while both run. A frozen weight has no weight-gradient GEMM to hide under.

    A block's GEMM time is split between its two linears by their FLOPs (QKV against proj, FC1
    against FC2); a backward is half input gradient, half weight gradient (equal FLOPs)."""
    moe = x.n_moe_layers / x.n_layers
    attention_fwd, attention_bwd, _ = gemm["attention"]
    mlp_fwd, mlp_bwd = (x.dense_share * gemm["dense_mlp"][i] + moe * gemm["moe_mlp"][i] for i in (0, 1))
    qkv_share, fc1_share = _input_linear_shares(x)
    wgrad_share = _weight_gradient_share(x)
    ring, pipelined, bulk = _overlap_tools(x, p, nbytes, group)
    after_down = pipelined(mlp_fwd * (1 - fc1_share))  # the reduce-scatter after FC2
    forward = (ring(attention_fwd * qkv_share) + pipelined(attention_fwd * (1 - qkv_share))
               + ring(mlp_fwd * fc1_share) + after_down)
    backward = (ring(attention_bwd * (1 - qkv_share) * (1 - wgrad_share))
                + ring(mlp_bwd * (1 - fc1_share) * (1 - wgrad_share))
                + _input_gradient_scatters_s(x, tools=(pipelined, bulk), nbytes=nbytes, group=group,
                                             qkv_bwd=attention_bwd * qkv_share, fc1_bwd=mlp_bwd * fc1_share))
    # op-level selective recompute gathers the attention and MLP inputs again, beside the one
    # GEMM each that it redoes there (k; a gated MLP's up projection)
    redone_attention, redone_mlp = op_level.redone_gemm_s(x, gemm)
    op_level_redo = ring(redone_attention) + ring(x.dense_share * redone_mlp)
    full = x.full_recompute_share * (forward - x.checkpoint_early_stop * after_down)  # early stop: no FC2 again
    recompute = ops.where(x.recompute == 2, full, ops.where(op_level_recompute(x), op_level_redo, 0.0))
    if module_recompute.lists_modules(x):  # a recomputed MLP's gather and scatter, beside its GEMMs again
        recompute = recompute + module_recompute.redone_tp_units(x) * (ring(mlp_fwd * fc1_share) + after_down)
    return forward + backward + recompute


def _input_gradient_scatters_s(x: Inputs, tools, nbytes, group, qkv_bwd, fc1_bwd):
    """The backward's reduce-scatters of the QKV and FC1 input gradients, given those linears'
    backward GEMM time. Transformer Engine runs each in bulk beside the weight-gradient GEMM;
    micro-pipeline TP (FrameworkSpec.tp_overlap_micro_pipeline) pipelines it beside the input-
    gradient GEMM of a single linear, and sends the sum over separate q/k/v (gate/up) linears' input
    gradients as a plain, exposed reduce-scatter (a reduce-scatter of the same bytes takes as long
    as the all-gather)."""
    pipelined, bulk = tools
    wgrad_share = _weight_gradient_share(x)
    userbuffers = bulk(qkv_bwd * wgrad_share) + bulk(fc1_bwd * wgrad_share)
    if not ops.any(x.tp_overlap_micro_pipeline > 0):
        return userbuffers
    plain = comm.all_gather_time_s(nbytes, group)
    micro = (ops.where(x.qkv_linears > 1, plain, pipelined(qkv_bwd * (1 - wgrad_share)))
             + ops.where(x.mlp_input_linears > 1, plain, pipelined(fc1_bwd * (1 - wgrad_share))))
    return ops.where(x.tp_overlap_micro_pipeline > 0, micro, userbuffers)


def context_parallel_exposed_s(x, p, tokens, layers, attention_fwd, attention_bwd):
    """Context-parallel traffic on the critical path, by `cp_kind`.

    ring (0): each rank passes its K and V chunk around the ring (cp−1 hops) while it computes on
    the previous chunk; backward moves K, V and their gradients. Only the part longer than the
    attention compute shows (Liu et al. 2023, Ring Attention §3).
    all-gather (1): the K/V chunks are gathered once per layer and only the local block's
    attention (1/cp of it) runs while the gather is in flight (PyTorch's `_AllGatherRotater`, the
    default rotate method torchtitan uses); backward gathers again and reduce-scatters dK, dV.
    ulysses (2): four all-to-alls per layer and pass re-shard q, k, v by heads and the output back
    by sequence, with nothing to hide under (Jacobs et al. 2023, DeepSpeed-Ulysses §3)."""
    if not ops.any(x.cp > 1):  # skipped where no row has context parallelism: zero anyway
        return 0.0
    forward = _context_parallel_pass_s(x, p, tokens)
    backward = 2 * forward
    recomputed = x.full_recompute_share
    ring = ops.maximum(forward - attention_fwd, 0.0) + ops.maximum(backward - attention_bwd, 0.0)
    ring = ring + recomputed * ops.maximum(forward - attention_fwd, 0.0)
    exposed = ring
    if ops.any(x.cp_kind > 0):
        gather_fwd = ops.maximum(forward - attention_fwd / x.cp, 0.0)
        gathered = (gather_fwd + ops.maximum(backward - attention_bwd / x.cp, 0.0)
                    + recomputed * gather_fwd)
        ulysses = _ulysses_pass_s(x, p, tokens) * (2 + recomputed)
        exposed = ops.where(x.cp_kind == 1, gathered, ops.where(x.cp_kind == 2, ulysses, ring))
    return ops.where(x.cp > 1, layers * exposed, 0.0)


def _ulysses_pass_s(x: Inputs, p: ModelParameters, tokens):
    """One layer's four all-to-alls in one pass (forward or backward): q and the attention output
    (heads·head_dim and heads·v_head_dim per token) and k and v (the key/value heads' widths), every
    rank holding its 1/cp of the tokens."""
    group = comm.GroupLinks(x.cp, x.tp, x, p)
    widths = (x.q_width_local, x.attention_out_local, x.kv_width_local, x.v_width_local)
    return ops.total(comm.all_to_all_time_s(tokens * width * x.activation_bytes, group) for width in widths)


def _context_parallel_pass_s(x: Inputs, p: ModelParameters, tokens):
    """One layer's ring exchange (or gather) of K and V in a forward pass (the backward moves twice
    that)."""
    group = comm.GroupLinks(x.cp, x.tp, x, p)
    kv_bytes = tokens * (x.kv_width_local + x.v_width_local) * x.activation_bytes
    return comm.all_gather_time_s(kv_bytes * x.cp, group)


def _context_parallel_hidden_s(x: Inputs, p: ModelParameters, micro):
    """The part of one micro-batch's context-parallel traffic that hides under its compute: all of
    the K/V traffic (forward, backward, and the recomputed forward) less what
    `context_parallel_exposed_s` left exposed; none for Ulysses, whose all-to-alls all show."""
    if not ops.any(x.cp > 1):
        return 0.0
    tokens = x.micro_batch_tokens
    passes = 3 + x.full_recompute_share
    total = x.layers_per_stage * x.attention_share * passes * _context_parallel_pass_s(x, p, tokens)
    hidden = ops.where(x.cp_kind == 2, 0.0, ops.maximum(total - micro["cp_comm"], 0.0))
    return ops.where(x.cp > 1, hidden, 0.0)


def expert_parallel_s(x: Inputs, p: ModelParameters, tokens, gemm):
    """MoE token dispatch and combine on one micro-batch's critical path: 2 exchanges per MoE layer
    forward, 2 backward (+2 when recomputed), each moving this rank's routed tokens (Lepikhin et al.
    2020, GShard) the way `moe_dispatcher` does (`_dispatch_s`); under `moe_a2a_overlap` the paired
    passes hide most of them (`_paired_exposed_s`). Returns (exposed, unpaired): the second is
    every exchange exposed, as in a pipeline's fill and drain."""
    if not ops.any(x.ep > 1):
        return 0.0, 0.0
    group = comm.GroupLinks(x.ep, x.etp * x.cp, x, p)
    one = _dispatch_s(x, group, tokens)
    count = 4 + 2 * x.full_recompute_share
    if module_recompute.lists_modules(x):  # a recomputed MoE layer dispatches and combines again
        count = count + module_recompute.redone_all_to_alls(x)
    exposed = ops.where(x.ep > 1, x.moe_layers_per_stage * count * one, 0.0)
    if not ops.any(x.moe_a2a_overlap > 0):
        return exposed, exposed
    share = _paired_share(x)
    paired = x.moe_layers_per_stage * (share * _paired_exposed_s(x, p, one, gemm) + (1 - share) * count * one)
    # only where Megatron-Core pairs them: ep > 1, no full recompute, interleaved when pipelined
    # (a planner's rows may not; a job file that asks otherwise is refused, specs/job.py)
    pairs = (x.moe_a2a_overlap > 0) & (x.ep > 1) & (x.recompute != 2) & ((x.pp == 1) | (x.vpp > 1))
    return ops.where(pairs, paired, exposed), exposed


def _paired_share(x: Inputs):
    """Share of a stage's forward and backward chunk passes that run paired under `moe_a2a_overlap`.
    Megatron-Core's combined 1F1B pairs the forward of micro-batch i+1 with the backward of i; the
    first stage warms up with W = 2(pp−1) + (vpp−1)·pp + 1 forward-only chunks (the interleaved
    schedule's warm-up, `microbatch_group_size_per_vp_stage` = pp, and one more so that the paired
    passes are independent: schedules.py get_pp_rank_microbatches) and cools down with as many
    backward-only ones, out of m·vpp each; with pp 1, W = 1: the first forward and the last backward."""
    warmup = 2 * (x.pp - 1) + (x.vpp - 1) * x.pp + 1
    return ops.maximum(1 - warmup / (x.micro_batches * x.vpp), 0.0)


def _paired_exposed_s(x: Inputs, p: ModelParameters, one, gemm):
    """One MoE layer's exchanges left on the critical path when its forward (of one micro-batch) and
    backward (of the previous) run paired, in Megatron-Core's stream order
    (TransformerLayerSchedulePlan.run): the backward's combine beside the forward's attention; the
    forward's dispatch, then the backward's, beside the backward's and then the forward's expert
    compute; the forward's combine beside the backward's attention. What outlasts its compute
    shows, and the compute loses the communication kernels' SMs while both run
    (`ep_overlap_comm_sms`). `one`: one dispatch's (or combine's) time."""
    attention_fwd = gemm["attention"][0] + gemm["attention_core"][0]
    attention_bwd = gemm["attention"][1] + gemm["attention_core"][1]
    experts = gemm["moe_mlp"][0] + gemm["moe_mlp"][1]
    sm_share = ops.minimum(p.ep_overlap_comm_sms / x.compute_units, 0.5)
    return (_beside_s(one, attention_fwd, sm_share) + _beside_s(2 * one, experts, sm_share)
            + _beside_s(one, attention_bwd, sm_share))


def _beside_s(comm_s, compute_s, sm_share):
    """What a collective adds to the critical path when it runs beside independent compute: the part
    that outlasts the compute, and the compute's slowdown by the SMs (`sm_share`) the collective's
    kernels take while both run."""
    return ops.maximum(comm_s - compute_s, 0.0) + sm_share * ops.minimum(comm_s, compute_s)


def _dispatch_s(x: Inputs, group, tokens):
    """One dispatch (a combine moves the same bytes back) of this rank's tokens, top_k·hidden
    activations each:

    * alltoall (0): a copy for every routed expert, (n−1)/n of them leaving the rank;
    * allgather (1): every rank's tokens gathered to the whole group (Megatron-Core's
      MoEAllGatherTokenDispatcher; the combine reduce-scatters them);
    * deduplicated (2, DeepEP, HybridEP): one copy over the network to each other node holding
      one of the token's experts, to the GPU of the same local rank, which forwards it over NVLink
      once to each GPU of its node holding one (DeepSeek-V3 §3.2.1); routing taken as uniform over
      the experts, E/n contiguous ones per rank (`_holding_share`)."""
    local_tokens = tokens * (x.etp / x.tp)  # this rank's tokens
    per_expert = comm.all_to_all_time_s(local_tokens * x.top_k * x.hidden * x.activation_bytes, group)
    if not ops.any(x.moe_dispatcher > 0):
        return per_expert
    token_bytes = local_tokens * x.hidden * x.activation_bytes
    n, k, nodes = group.size, group.ranks_per_node, group.nodes
    gathered = comm.all_gather_time_s(token_bytes * n, group)
    # copies per token: one per other node that holds a routed expert; over NVLink one per GPU that
    # does, but for the forwarding GPU itself (1 in k)
    remote = (nodes - 1) * _holding_share(x, x.n_experts * k / n)
    local = n * _holding_share(x, x.n_experts / n) * (k - 1) / k
    deduplicated = comm.copies_time_s(token_bytes, local, remote, group)
    return ops.where(x.moe_dispatcher == 1, gathered, ops.where(x.moe_dispatcher == 2, deduplicated, per_expert))


def _holding_share(x: Inputs, experts_held):
    """Chance that a token's top_k experts, drawn uniformly without repeats from n_experts, include
    one of `experts_held` given ones: 1 − C(E − e, k) / C(E, k)."""
    missed = 1.0
    for i in range(int(np.max(x.top_k))):
        left = ops.maximum(x.n_experts - experts_held - i, 0.0) / ops.maximum(x.n_experts - i, 1.0)
        missed = missed * ops.where(i < x.top_k, left, 1.0)
    return 1 - missed


def pipeline_comm_s(x: Inputs, p: ModelParameters, per_micro_s=0.0):
    """Stage-to-stage activation sends on the critical path: forward and backward for each of the
    m·v micro-batch chunks a stage handles, plus the fill and drain across p−1 boundaries. Megatron
    scatters the activation over the TP ranks before sending (Narayanan et al. 2021 §4.1). Where the
    interleaved schedule overlaps them (FrameworkSpec.pp_p2p_overlap, vpp > 1), a steady-state send
    shows only what outlasts the chunk pass beside it, a forward's: a third of a micro-batch's
    `per_micro_s` over the v chunks (the backward's two thirds)."""
    if not ops.any(x.pp > 1):
        return 0.0
    tokens = x.micro_batch_tokens
    nbytes = tokens * x.hidden * x.activation_bytes / x.tp
    across_nodes = x.tp * x.cp * x.dp >= x.fabric_gpus  # a stage fills its scale-up fabric
    send = comm.p2p_time_s(nbytes, across_nodes & (x.n_fabrics > 1), x, p)
    steady, fill_drain = 2 * x.vpp * x.micro_batches, 2 * (x.pp - 1)
    overlapped = (x.pp_p2p_overlap > 0) & (x.vpp > 1)
    beside = ops.maximum(send - per_micro_s / (3 * x.vpp), 0.0)
    exposed = ops.where(overlapped, steady * beside, steady * send) + fill_drain * send
    return ops.where(x.pp > 1, exposed, 0.0)


def _data_parallel_windows_s(x: Inputs, p: ModelParameters, micro):
    """The compute data-parallel traffic can hide under in one micro-batch: (forward, backward).

    The micro-batch's elapsed compute, split between the passes in proportion to their kernels as
    issued without recomputation at the model's launch cost: a fixed share, so neither a faster
    GPU or CPU nor a policy that recomputes more can move window from one pass to the other (with
    the recomputation's kernels counted, full recompute would grow the backward window by more
    than it lengthens the micro-batch, and so come out faster than selective). The data-parallel
    group (dp·cp ranks at stride tp) shares its links with the context-parallel ring: the ring
    traffic that hides under compute takes its part of the window first, so a faster attention
    that exposes more of the ring does not also shrink the window it left."""
    elapsed = micro["forward"] + micro["backward"]
    reference = x.with_values(recompute=0.0 * x.recompute, kernel_launch_us=p.kernel_launch_us)
    if host_issue.any_graphs(x):  # the passes' kernels, however they are launched
        reference = host_issue.ungraphed(reference)
    issue_fwd, issue_bwd = host_issue.host_issue_s(reference, p)
    free = ops.maximum(elapsed - _context_parallel_hidden_s(x, p, micro), 0.0) * p.dp_overlap_fraction
    share_fwd = issue_fwd / (issue_fwd + issue_bwd)
    return free * share_fwd, free * (1 - share_fwd)


def data_parallel_exposed_s(x: Inputs, p: ModelParameters, micro) -> Any:
    """Gradient reduction (and ZeRO's parameter gathers) minus what hides under compute.

    Traffic moves in units, each a collective of its own that pays the ring's latency (which grows
    with the group, collectives.py): ZeRO-0/1/2 reduce gradients in buckets of `dp_bucket_mb` as
    the backward produces them (PyTorch DDP `bucket_cap_mb`); ZeRO-3/FSDP gathers and reduces one
    layer per unit, the next layer's gather prefetched during the current layer's compute (FSDP
    `backward_prefetch=BACKWARD_PRE`, FSDP2 per-block `fully_shard`; Zhao et al. 2023 §3.3).
    A unit hides under its own layer's compute only, so a gather longer than a layer shows its
    excess layer by layer; the first gather of the forward and the last bucket or reduce-scatter of
    the backward never hide.

    ZeRO-0: all-reduce of the gradients once per step, under the last micro-batch's backward.
    ZeRO-1: reduce-scatter of gradients + all-gather of updated 16-bit weights, once per step; the
    gather exposed, or beside the next step's first forward (`dp_param_gather_overlap`).
    ZeRO-2: reduce-scatter after every micro-batch's backward, all-gather once per step.
    ZeRO-3/FSDP: per micro-batch, per layer: gather weights for forward and again for backward,
    reduce-scatter gradients (Rajbhandari et al. 2020 §5).
    HSDP (`dp_shard`): ZeRO's collectives run inside the shard group, and every reduce-scatter is
    followed by an all-reduce of the reduced shard across the group's replicas (PyTorch FSDP
    HYBRID_SHARD; FSDP2 on a 2-D mesh).
    Gradient accumulation amortizes the once-per-step traffic over m micro-batches.
    """
    if not ops.any(x.dp * x.cp > 1):  # no row has a data-parallel group: nothing moves (see the last line)
        return 0.0
    dense, experts = local_parameter_counts(x)
    trainable_dense, trainable_expert = trainable_parameter_counts(x)
    # ZeRO's collectives run over the shard group (all of dp · cp, or the HSDP group); ZeRO-0's
    # all-reduce over every data-parallel rank
    group = ops.where(x.zero >= 1, x.zero_shard, x.dp * x.cp)
    dense_group = comm.GroupLinks(group, x.tp, x, p)
    any_experts = bool(ops.any(experts > 0))
    if any_experts:  # a dense model has no expert group to build
        expert_group = comm.GroupLinks(ops.maximum(group * x.tp / (x.ep * x.etp), 1.0), x.etp * x.cp * x.ep, x, p)
    hybrid = bool(ops.any((x.dp_replicas > 1) & (x.zero >= 1)))
    if hybrid:  # HSDP: each reduced gradient shard is all-reduced across the group's replicas
        replica_group = comm.GroupLinks(x.dp_replicas, x.tp * x.zero_shard, x, p)

    def replicas_of(count_dense, count_expert, units):
        """(all units, one unit) of the replicas' all-reduce of the reduced shards; 0 without HSDP."""
        if not hybrid:
            return 0.0, 0.0
        shard_bytes = (count_dense + count_expert) / x.zero_shard / units * x.grad_bytes
        one = ops.where((x.dp_replicas > 1) & (x.zero >= 1), comm.allreduce_time_s(shard_bytes, replica_group), 0.0)
        return units * one, one

    def units_of(collective, count_dense, count_expert, element_bytes, units):
        """(all units, one unit): the traffic split into `units` collectives of equal size."""
        dense_s = collective(count_dense / units * element_bytes, dense_group)
        if any_experts:  # a dense model: the expert group's collective would be zeroed anyway
            dense_s = dense_s + ops.where(count_expert > 0, collective(count_expert / units * element_bytes,
                                                                      expert_group), 0.0)
        return units * dense_s, dense_s

    layers = ops.maximum(x.layers_per_stage, 1.0)
    window_fwd, window_bwd = _data_parallel_windows_s(x, p, micro)
    m = x.micro_batches
    bucket_mb_bytes = p.dp_bucket_mb * 2.0**20

    # the framework's bucket of elements (DeepSpeed reduce_bucket_size; Megatron-Core's grows with
    # the dp·cp group), else dp_bucket_mb
    bucket_elements = ops.maximum(x.dp_bucket_elements, x.dp_bucket_elements_per_rank * x.dp * x.cp)

    def buckets(count_dense, count_expert, element_bytes):
        bucket_bytes = ops.where(bucket_elements > 0, bucket_elements * element_bytes, bucket_mb_bytes)
        return ops.maximum(ops.ceil((count_dense + count_expert) * element_bytes / bucket_bytes), 1.0)

    def exposed(traffic, last_unit, window):
        """What does not fit under the window, and never less than the last unit."""
        return ops.maximum(traffic - window, last_unit)

    # only the ZeRO stages some row uses are computed (a single estimate uses one)
    used = ops.distinct_values(x.zero)
    grad_buckets = buckets(trainable_dense, trainable_expert, x.grad_bytes)
    zero0 = zero1 = zero2 = zero3 = 0.0
    if 0 in used:
        total, last = units_of(comm.allreduce_time_s, trainable_dense, trainable_expert, x.grad_bytes, grad_buckets)
        zero0 = exposed(total, last, window_bwd)
    if used & {1, 2}:
        total, last = units_of(comm.reduce_scatter_time_s, trainable_dense, trainable_expert, x.grad_bytes,
                               grad_buckets)
        replicated, replicated_last = replicas_of(trainable_dense, trainable_expert, grad_buckets)
        total, last = total + replicated, last + replicated_last
        gather, first_gather = units_of(comm.all_gather_time_s, trainable_dense, trainable_expert, x.weight_bytes,
                                        buckets(trainable_dense, trainable_expert, x.weight_bytes))
        # overlap_param_gather: the gathers beside the next step's first forward, the first one exposed
        gather = ops.where(x.dp_param_gather_overlap > 0, exposed(gather, first_gather, window_fwd), gather)
        zero1 = exposed(total, last, window_bwd) + gather
        zero2 = m * exposed(total, last, window_bwd) + gather
    if 3 in used:
        # 16-bit weights, or fp8 linears under fp8 all-gather (memory.gathered_bytes_per_weight)
        _, gather = units_of(comm.all_gather_time_s, dense, experts, gathered_bytes_per_weight(x), layers)
        _, reduce = units_of(comm.reduce_scatter_time_s, trainable_dense, trainable_expert, x.grad_bytes, layers)
        reduce = reduce + replicas_of(trainable_dense, trainable_expert, layers)[1]
        # prefetch depth one: layer i+1's gather runs during layer i; the first has nothing to hide under
        forward = gather + (layers - 1) * ops.maximum(gather - window_fwd / layers, 0.0)
        # backward: layer i−1's gather and layer i's reduce-scatter during layer i's backward; the last
        # layer stays gathered from its forward, the first layer's reduce-scatter comes after all compute
        backward = reduce + (layers - 1) * ops.maximum(gather + reduce - window_bwd / layers, 0.0)
        # a stage FSDP keeps gathered under PP (memory.stage_kept_gathered) is gathered once, in the
        # first micro-batch's forward, and reduced once, after the last backward
        kept = stage_kept_gathered(x)
        if type(kept) is np.ndarray or kept:
            once = forward + reduce + (layers - 1) * ops.maximum(reduce - window_bwd / layers, 0.0)
            zero3 = ops.where(kept, once, m * (forward + backward))
        else:  # no stage kept gathered: every micro-batch gathers and reduces
            zero3 = m * (forward + backward)
    by_stage = ops.where(x.zero == 0, zero0, ops.where(x.zero == 1, zero1, ops.where(x.zero == 2, zero2, zero3)))
    return ops.where(x.dp * x.cp > 1, by_stage, 0.0)
