"""The model core: `Inputs` (scalars or arrays) → step time, memory and FLOPs, all vectorized.

One micro-batch on one GPU of the slowest pipeline stage is the unit: its forward, backward and
recomputation (compute.py), the tensor/context/expert-parallel traffic on its critical path
(collectives.py), then the step: micro-batches × that, the pipeline bubble, the exposed part of
data-parallel traffic, the optimizer and the host side. The `estimate` and `plan` paths share
this code, so a plan and the estimate of the job it describes agree exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainrig.estimate import collectives as comm
from trainrig.estimate import module_recompute, ops
from trainrig.estimate.compute import (
    GemmBatch,
    attention_time_s,
    eager_elementwise_scale,
    eager_softmax,
    elementwise_bytes_per_token,
)
from trainrig.estimate.distinct import per_distinct_row
from trainrig.estimate.flops import attention_projection_weights, hardware_flops_per_token, model_flops_per_token
from trainrig.estimate.inputs import Inputs
from trainrig.estimate.memory import (
    activation_bytes_per_layer,
    gathered_bytes_per_weight,
    in_flight_layers,
    local_parameter_counts,
    memory_fit,
    memory_state,
    op_level_recompute,
    stage_kept_gathered,
    stage_linear_parameters,
    trainable_parameter_counts,
)
from trainrig.estimate.params import ModelParameters

__all__ = ["evaluate", "Outputs", "STEP_PARTS", "MEMORY_PARTS"]

STEP_PARTS = ("compute", "launch_overhead", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "pp_bubble",
              "dp_comm", "data_loading", "host_transfer", "checkpoint", "cpu_optimizer", "other")
MEMORY_PARTS = ("weights", "gradients", "optimizer", "activations", "other")
TOKEN_BATCH_BYTES = 16  # int64 input ids + int64 labels per token, copied host → device


@dataclass(frozen=True)
class Outputs:
    """Everything the core computes; every field is a float or an array over configurations."""

    step_parts_s: dict[str, Any]
    memory_parts_bytes: dict[str, Any]
    step_time_s: Any
    memory_bytes: Any
    fits: Any
    tokens_per_s: Any
    model_flops_per_token: Any
    hardware_flops_per_token: Any
    model_tflops_per_gpu: Any
    hardware_tflops_per_gpu: Any
    mfu: Any
    host_ram_gb_per_node: Any
    memory_allocated_bytes: Any  # peak of the tensors the allocator hands out
    memory_reserved_bytes: Any  # what the caching allocator holds from the driver at that peak
    memory_paged_bytes: Any  # paged optimizer states (unified memory, outside the allocator)
    memory_peak_phase: Any  # 0 = end of forward, 1 = end of backward
    gpu_busy_s: Any  # GPU-side time per step (what host-side work can hide under)
    launch_bound_fraction: Any  # share of micro-batch compute set by host launch speed, not the GPU


def evaluate(x: Inputs, p: ModelParameters, with_memory: bool = True) -> Outputs:
    """Step time, memory and FLOPs for every configuration in `x` (scalars or arrays).

    `with_memory=False` leaves the memory fields None, for callers that already ran `memory_fit`
    on the same rows (the planner checks memory before it times anything)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # unused branches (e.g. MoE of a dense model)
        return _evaluate(x, p, with_memory)


def _evaluate(x: Inputs, p: ModelParameters, with_memory: bool) -> Outputs:
    memory_x = x
    # time runs at the padded length of a micro-batch; memory peaks at the longest sample (seq_len)
    if ops.any(x.compute_seq_len != x.seq_len):
        x = x.with_values(seq_len=x.compute_seq_len)
    micro = _micro_batch(x, p)
    m = x.micro_batches
    per_micro = ops.total(micro[k] for k in ("compute", "launch_overhead", "tp_comm", "cp_comm", "ep_comm"))
    parts = {
        "compute": m * micro["compute"],
        "launch_overhead": m * micro["launch_overhead"],
        "tp_comm": m * micro["tp_comm"],
        "cp_comm": m * micro["cp_comm"],
        "ep_comm": m * micro["ep_comm"],
        "pp_comm": _pipeline_comm_s(x, p),
        "pp_bubble": _pipeline_bubble_s(x, per_micro, micro["weight_grad"]),
    }
    parts["dp_comm"] = _data_parallel_exposed_s(x, p, micro)
    optimizer_s, offload_s = _optimizer_s(x, p)
    gpu_busy = ops.total(parts.values()) + optimizer_s
    parts["data_loading"] = _data_loading_exposed_s(x, p, gpu_busy, m * micro["host_issue"])
    parts["host_transfer"] = ops.total((_host_transfer_exposed_s(x, gpu_busy), offload_s,
                                        _offload_exposed_s(x, p, micro)))
    parts["checkpoint"] = _checkpoint_s(x)
    # an offloaded optimizer steps on the host (ZeRO-Offload's CPU-Adam): its own part, so a step
    # the CPU holds back says so; the on-GPU step stays in `other` with the per-step overhead
    parts["cpu_optimizer"] = ops.where(x.optimizer_offloaded, optimizer_s, 0.0)
    # (a − b as a + (−b), the same number: `total` leaves out a single zero)
    parts["other"] = ops.total((optimizer_s, -parts["cpu_optimizer"])) + p.step_overhead_s
    step = ops.total(parts.values())

    state, memory, total_memory, fits = _memory(memory_x, p) if with_memory else ({}, None, None, None)
    tokens_per_s = x.global_batch * x.real_seq_len / step
    n_gpus = x.tp * x.pp * x.cp * x.dp
    model_fpt = model_flops_per_token(x)
    hardware_fpt = hardware_flops_per_token(x)
    model_tflops = model_fpt * tokens_per_s / n_gpus / 1e12
    return Outputs(
        step_parts_s=parts,
        memory_parts_bytes=memory,
        step_time_s=step,
        memory_bytes=total_memory,
        fits=fits,
        tokens_per_s=tokens_per_s,
        model_flops_per_token=model_fpt,
        hardware_flops_per_token=hardware_fpt,
        model_tflops_per_gpu=model_tflops,
        hardware_tflops_per_gpu=hardware_fpt * tokens_per_s / n_gpus / 1e12,
        mfu=model_tflops / x.mfu_peak_tflops,
        host_ram_gb_per_node=_host_ram_gb(memory_x, p) if with_memory else None,
        memory_allocated_bytes=state.get("allocated"),
        memory_reserved_bytes=state.get("reserved"),
        memory_paged_bytes=state.get("paged"),
        memory_peak_phase=state.get("phase"),
        gpu_busy_s=gpu_busy,
        launch_bound_fraction=micro["launch_bound_fraction"],
    )


def _memory(x: Inputs, p: ModelParameters):
    """The peak's state, its parts, the total and whether it fits (memory.py)."""
    state = memory_state(x, p)
    memory = {k: state[k] for k in MEMORY_PARTS}
    total_memory, _, fits = memory_fit(x, p, memory)
    return state, memory, total_memory, fits


# ---- one micro-batch on one GPU -----------------------------------------------------------------


def _micro_batch(x: Inputs, p: ModelParameters) -> dict[str, Any]:
    tokens = x.micro_batch * x.seq_len / x.cp
    layers = x.layers_per_stage
    arithmetic = _arithmetic_s(x, p)
    compute = ops.total((arithmetic["compute"], _zero3_gradient_path_s(x)))
    tp = _tensor_parallel_s(x, p, tokens, layers, arithmetic["gemm"])
    cp = _context_parallel_exposed_s(x, p, tokens, layers, *arithmetic["attention"])
    ep = _expert_parallel_s(x, p, tokens)
    gpu = ops.total((compute, tp, cp, ep))
    # The host issues every kernel while the GPU runs earlier ones; the overlap is imperfect, so
    # the pass outlasts the GPU's own time, by most when host and GPU need about as long: that
    # excess is launch overhead on the critical path.
    host_fwd, host_bwd = host_issue_s(x, p)
    host = host_fwd + host_bwd
    sharing = _core_sharing(x, host, gpu)
    if type(sharing) is np.ndarray or sharing != 1.0:  # (1.0: enough cores, or an unknown count)
        host = host * sharing
    launch_overhead = ops.maximum(_overlapped_s(host, gpu, p.host_gpu_overlap_exponent) - gpu, 0.0)
    elapsed = compute + launch_overhead
    return {
        "compute": compute,
        "weight_grad": arithmetic["weight_grad"],
        "launch_overhead": launch_overhead,
        # The windows data-parallel traffic can hide under: the micro-batch's elapsed compute, split
        # between the passes in proportion to their kernels (a fixed share, so a faster GPU or CPU
        # never lengthens the step through a shorter window alone).
        "forward": elapsed * host_fwd / host,
        "backward": elapsed * host_bwd / host,
        "tp_comm": tp,
        "cp_comm": cp,
        "ep_comm": ep,
        "launch_bound_fraction": ops.where(host > gpu, 1 - gpu / host, 0.0),
        "host_issue": host,
    }


# Fields the GEMM and attention-core timing never reads (`_gemm_times_s`): the pipeline and
# data-parallel layout, memory savers, links, host and memory capacity. A planner's rows that differ
# only in these share their GEMM times, which are then computed once (see distinct.py).
GEMM_IGNORES = frozenset({
    "pp", "dp", "vpp", "pp_embedding_slot", "pp_loss_slot", "global_batch", "zero", "recompute",
    "sequence_parallel", "tp_comm_overlap", "cp_kind", "gpus_per_node", "n_nodes", "fabric_gpus", "n_fabrics",
    "recompute_num_layers",
    "memory_gib", "mfu_peak_tflops", "kernel_launch_us", "intra_bandwidth_gbs", "intra_latency_us",
    "scale_up_domain", "pcie_peer_gbs", "inter_node_bandwidth_gbs", "inter_latency_us", "pcie_bandwidth_gbs",
    "pcie_latency_us", "cpu_cores_per_node", "host_memory_bandwidth_gbs", "storage_read_gbs", "storage_write_gbs",
    "ram_gb_per_node", "collate_rate_per_core", "tokenize_rate_per_core", "checkpoint_interval_steps",
    "loader_workers_per_gpu", "pretokenized",
})


def _arithmetic_s(x: Inputs, p: ModelParameters) -> dict[str, Any]:
    """GPU time of one micro-batch's arithmetic on one GPU of the slowest stage: its layers'
    forward, backward and recomputation and the output head (`compute`), and one layer's attention
    core (forward, backward), which context-parallel traffic hides under."""
    tokens = x.micro_batch * x.seq_len / x.cp
    redone = bool(ops.any(op_level_recompute(x)))  # over all rows: recompute is in GEMM_IGNORES
    gemm = per_distinct_row(lambda rows: _gemm_times_s(rows, p, redone), x, GEMM_IGNORES)
    layer_fwd, layer_bwd, layer_recompute = _layer_times_s(x, p, tokens, gemm)
    logits_fwd, logits_bwd = _logits_times_s(x, tokens, gemm)
    layer = layer_fwd + layer_bwd + layer_recompute
    # the slowest stage: the fullest one, or the last, whose head may displace a layer (a loss slot)
    compute = x.end_stage_layers * layer + logits_fwd + logits_bwd + _mtp_s(x, gemm, layer, logits_fwd + logits_bwd)
    if type(x.layers_per_stage) is np.ndarray or x.layers_per_stage != x.end_stage_layers:
        compute = ops.maximum(x.layers_per_stage * layer, compute)  # (same layers: the head only adds)
    # the weight-gradient GEMMs of the stage's layers: the W pass a zero-bubble schedule moves
    weight_grad = x.layers_per_stage * _mlp_mixed(gemm["attention"][2], gemm["dense_mlp"][2], gemm["moe_mlp"][2],
                                                  x.n_moe_layers / x.n_layers)
    return {"compute": compute, "attention": gemm["attention_core"], "gemm": gemm, "weight_grad": weight_grad}


def _mtp_s(x: Inputs, gemm, layer, logits):
    """The last stage's multi-token prediction modules (DeepSeek-V3 §2.2; Megatron-Core's
    MultiTokenPredictionBlock): each one more layer (the stage's average layer), its projection and
    the output head and loss again. Their TP/EP traffic and kernel launches are not counted."""
    if not ops.any(x.mtp_layers > 0):
        return 0.0
    projection_fwd, projection_bwd, _ = gemm["mtp_projection"]
    return x.mtp_layers * (layer + logits + projection_fwd + projection_bwd)


def _pipeline_bubble_s(x: Inputs, per_micro, weight_grad):
    """Idle time of the pipeline per step: (pp − 1)/vpp micro-batches under 1F1B and GPipe
    (Narayanan et al. 2021 §2.2); under ZB-H1 the weight-gradient pass W of the tail's micro-batches
    fills it, (pp − 1)·(F + B − W) instead of (pp − 1)·(F + B + W) (Qi et al. 2024 §2.1), i.e. two W
    fewer per bubble micro-batch; with vpp > 1 per chunk alike."""
    if not ops.any(x.pp > 1):
        return 0.0
    filled = ops.where(x.pp_schedule == 2, ops.maximum(per_micro - 2 * weight_grad, 0.0), per_micro)
    return (x.pp - 1) / x.vpp * filled


def host_issue_s(x: Inputs, p: ModelParameters):
    """Host time to issue one micro-batch's kernels on one GPU: (forward, backward + recompute)."""
    forward_kernels, backward_kernels = _kernels_per_layer(x, p)
    forward_ops, backward_ops = _small_ops_per_layer(x, p)
    layers = x.layers_per_stage
    fetch_fwd, fetch_bwd = _zero3_fetch_s(x, p)
    # + embedding, logits and loss: ~8 kernels forward, ~12 backward
    return (ops.total(((layers * forward_kernels + 8) * x.kernel_launch_us * 1e-6,
                       layers * forward_ops * p.eager_op_host_us * 1e-6, fetch_fwd)),
            ops.total(((layers * backward_kernels + 12) * x.kernel_launch_us * 1e-6,
                       layers * backward_ops * p.eager_op_host_us * 1e-6, fetch_bwd)))


def _core_sharing(x: Inputs, host, gpu):
    """How much longer kernel issue takes when a node's training processes outnumber its cores: each
    process keeps a core busy for its issuing share of the pass (all of it when launch-bound), and a
    fair-share scheduler stretches every process's issue by demand / cores once the demand exceeds
    the cores. 1 with enough cores or an unknown count."""
    cores = x.cpu_cores_per_node
    if not ops.any(ops.isfinite(cores)):  # no row knows its cores (NaN): nothing to share
        return 1.0
    demand = x.gpus_per_node * _issuing_share(host, gpu)
    return ops.where(ops.isfinite(cores) & (demand > cores), demand / ops.where(cores > 0, cores, 1.0), 1.0)


def _issuing_share(host, gpu):
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
    modules = gathered + 2 * x.layers_per_stage  # and the 2 norms
    per_pass = ops.where(x.zero >= 3, modules * x.zero3_module_fetch_us * 1e-6, 0.0)
    sharded = (x.zero >= 3) & (x.zero_shard > 1)
    gather = ops.where(sharded, gathered * x.zero3_gather_host_ops * p.eager_op_host_us * 1e-6, 0.0)
    return per_pass + gather, per_pass * (1 + x.full_recompute_share) + gather


def _zero3_gradient_path_s(x: Inputs):
    """GPU time of ZeRO-3's gradient path per micro-batch beyond the reduce-scatter: the framework's
    `zero3_grad_full_passes` over the whole 16-bit trainable gradient (DeepSpeed's pre-divide) and
    `zero3_grad_shard_passes` over this rank's shard (accumulation into the gradient partition; a
    copy on the first micro-batch, one pass fewer), streamed through HBM. On one rank too; not with
    the optimizer offloaded, whose gradient partitions live in host memory (that path is not counted)."""
    if not ops.any((x.zero >= 3) & (x.zero3_grad_full_passes + x.zero3_grad_shard_passes > 0)):
        return 0.0  # no row runs such a path (every framework but DeepSpeed, every ZeRO stage below 3)
    trainable_dense, trainable_expert = trainable_parameter_counts(x)
    shard_passes = ops.maximum(x.zero3_grad_shard_passes - 1 / x.micro_batches, 0.0)
    passes = x.zero3_grad_full_passes + shard_passes / x.zero_shard
    nbytes = (trainable_dense + trainable_expert) * x.weight_bytes * passes
    on_gpu = ops.where(x.zero >= 3, nbytes / (x.hbm_bandwidth_gbs * 1e9), 0.0)
    return ops.where(x.optimizer_offloaded, 0.0, on_gpu)  # offloaded: the partitions are in host memory


def _overlapped_s(host, gpu, exponent: float):
    """Time of a pass whose kernels the host issues while the GPU runs earlier ones: the
    `exponent`-norm of the two totals (∞ = the slower side alone, 1 = no overlap at all)."""
    slower, faster = ops.maximum(host, gpu), ops.minimum(host, gpu)
    ratio = ops.divide(faster, slower, default=0.0)
    return slower * (1 + ratio ** exponent) ** (1 / exponent)


def _gemm_times_s(x: Inputs, p: ModelParameters, op_level: bool = True) -> dict[str, Any]:
    """Every GEMM of one layer and of the output head, timed in one vectorized call, and the
    layer's attention core (`attention_core`: forward, backward; see compute.attention_time_s).

    Returns forward and backward times per block: attention projections, dense MLP, MoE MLP
    (routed experts as a grouped GEMM over this GPU's experts, plus shared experts and the router;
    tokens assumed balanced: tokens·top_k routed rows spread over n_experts/ep local experts, each
    sharded over tp), and the logits. Frozen weights (LoRA/QLoRA) skip their weight gradients.
    `op_level`: also time the GEMMs op-level selective recompute redoes (`op_recompute`), which
    the caller asks for when any configuration runs that policy; else they are zero.
    """
    tokens = x.micro_batch * x.seq_len / x.cp
    batch = GemmBatch()
    q_local, k_local, v_local = x.q_width_local, x.kv_width_local, x.v_width_local
    up_width = x.mlp_matrices - 1  # gate and up: 2 for a gated MLP
    ffn_local = x.ffn_hidden / x.tp
    output = batch.linear(tokens, x.attention_out_local, x.hidden)
    attention = _projections(batch, tokens, x.hidden, q_local + k_local + v_local,
                             ((q_local, 1), (k_local, 1), (v_local, 1)), x.fused_qkv, output)
    mla_up = []  # MLA's up projections, which recompute_modules: [mla_up_proj] redoes
    if ops.any(x.mla > 0):
        attention, mla_up = _mla_attention(batch, x, tokens, output, attention)
    dense = _projections(batch, tokens, x.hidden, up_width * ffn_local, ((ffn_local, 2),), x.mlp_input_linears == 1,
                         batch.linear(tokens, ffn_local, x.hidden))
    # MoE GEMMs only where some configuration has MoE layers (a dense model's would be zeroed anyway)
    any_moe = bool(ops.any(x.n_moe_layers > 0))
    # shared experts' GEMMs only where some configuration has them (Mixtral's would be zero-width)
    any_shared = any_moe and bool(ops.any(x.n_shared_experts > 0))
    shared_width = x.n_shared_experts * x.shared_ffn_hidden / x.tp
    shared = [batch.linear(tokens, x.hidden, up_width * shared_width),
              batch.linear(tokens, shared_width, x.hidden)] if any_shared else []
    router = [batch.linear(tokens, x.hidden, ops.maximum(x.n_experts, 1.0))]
    local_experts = ops.maximum(x.n_experts / x.ep, 1.0)
    # an expert TP group of etp ranks computes the tokens of etp/tp tensor-parallel groups
    rows = tokens * x.top_k / local_experts * (x.etp / x.tp)
    width = x.expert_ffn_hidden / x.etp
    experts = [tuple(batch.add(m, n, k, local_experts) for m, n, k in (
        (rows, up_width * width, x.hidden), (rows, x.hidden, up_width * width), (x.hidden, up_width * width, rows))),
        tuple(batch.add(m, n, k, local_experts) for m, n, k in (
            (rows, x.hidden, width), (rows, width, x.hidden), (width, x.hidden, rows)))] if any_moe else []
    if not any_moe:
        shared, router = [], []
    logits = [batch.linear(tokens, x.hidden, x.vocab / x.tp, head=True)]
    # multi-token prediction's projection of [norm(h); norm(embedding)], split over TP
    mtp_projection = [batch.linear(tokens, 2 * x.hidden, x.hidden / x.tp)] if ops.any(x.mtp_layers > 0) else []
    redone = _op_level_recomputed_gemms(batch, x, tokens, attention) if op_level else None
    t = batch.run(x, p)
    trainable = x.method == 0

    def passes(linears):
        """(forward, backward, of which the weight gradients) of a list of linears."""
        if type(linears) is tuple:  # (fused or not, as fused, as separate linears): rows differ in layout
            fused, *layouts = linears
            return tuple(ops.where(fused > 0, a, b) for a, b in zip(*map(passes, layouts), strict=True))
        forward = ops.total(t[f] for f, _, _ in linears)
        if type(trainable) is not np.ndarray:  # one answer for every row: add the weight gradients or not
            backward = ops.total(t[g] for _, d, w in linears for g in ((d, w) if trainable else (d,)))
            return forward, backward, ops.total(t[w] for _, _, w in linears) if trainable else 0.0
        backward = ops.total(t[d] + ops.where(trainable, t[w], 0.0) for _, d, w in linears)
        return forward, backward, ops.total(ops.where(trainable, t[w], 0.0) for _, _, w in linears)

    moe = (0.0, 0.0, 0.0)
    if any_moe:
        has_shared = x.n_shared_experts > 0
        blocks = zip(passes(experts), passes(shared), passes(router), strict=True)
        moe = tuple(ops.where(x.n_moe_layers > 0, ops.total((routed, ops.where(has_shared, common, 0.0), gate)), 0.0)
                    for routed, common, gate in blocks)
    return {"attention": passes(attention), "dense_mlp": passes(dense), "moe_mlp": moe, "logits": passes(logits),
            "attention_core": attention_time_s(tokens, x.n_heads / x.tp, x, p),
            "op_recompute": (0.0, 0.0, 0.0) if redone is None else tuple(t[g] for g in redone),
            "mtp_projection": passes(mtp_projection) if mtp_projection else (0.0, 0.0, 0.0),
            # what Megatron-Core's recompute_modules redo (their forward; module_recompute.py)
            "mla_up": passes(mla_up) if mla_up else (0.0, 0.0, 0.0),
            "shared_mlp": passes(shared) if shared else (0.0, 0.0, 0.0),
            "down_forward": t[_output_linear(dense)[0]]}


def _mla_attention(batch: GemmBatch, x: Inputs, tokens, output, ordinary):
    """Multi-head latent attention's linears (ModelSpec.mla_projections), then `output` (o):
    the down projections replicated on every TP rank over its tokens (x.mla_down_tokens_share),
    the up projections split by heads. Rows without MLA keep their `ordinary` linears (a tuple
    `passes` picks between, as for fused layouts). Returns them and the up projections (the
    query's from its latent, or from the hidden state without one, and the key/value one)."""
    down_tokens = tokens * x.mla_down_tokens_share
    has_q_latent = x.q_lora_rank > 0
    q_rank = ops.maximum(x.q_lora_rank, 1.0)  # a zero-width GEMM stays finite; unused rows are discarded
    key_value_up = x.mla_kv_up_width / x.tp
    key_value = [batch.linear(down_tokens, x.hidden, x.kv_lora_rank + x.rope_head_dim),
                 batch.linear(tokens, x.kv_lora_rank, key_value_up)]
    query_down, query_up = batch.linear(down_tokens, x.hidden, q_rank), batch.linear(tokens, q_rank, x.q_width_local)
    query = batch.linear(tokens, x.hidden, x.q_width_local)
    latent, direct = [query_down, query_up, *key_value, output], [query, *key_value, output]
    up_latent, up_direct = [query_up, key_value[1]], [query, key_value[1]]
    if type(has_q_latent) is not np.ndarray or has_q_latent.min() == has_q_latent.max():
        mla, up = (latent, up_latent) if bool(np.all(has_q_latent)) else (direct, up_direct)
    else:
        mla, up = (has_q_latent, latent, direct), (has_q_latent, up_latent, up_direct)
    if type(x.mla) is not np.ndarray or x.mla.min() == x.mla.max():
        return (mla if bool(np.all(x.mla > 0)) else ordinary), up
    return (x.mla, mla, ordinary), up


def _op_level_recomputed_gemms(batch: GemmBatch, x: Inputs, tokens, attention):
    """The forward GEMMs torchtitan's op-level policy redoes in the backward, added to `batch`.

    Its policy (`_custom_policy` in torchtitan's parallelize_llama.py) keeps every odd aten.mm in
    forward order — q, v, the gate w1 and the down projection w2 of a block that runs q k v o w1 w3
    w2 — and redoes the even ones that the backward needs: k (for attention's backward), o (its
    output rebuilds the residual that the MLP's norm reads; under sequence parallelism the
    reduce-scattered output is kept instead) and, in a gated MLP, the up projection w3 (its output
    is an input of the product). With q, k and v in one linear that linear is the first, kept, and
    o the second; with gate and up in one, that linear is kept and the down projection, redone,
    is not needed by the backward. Returns the indices of k's, o's and w3's forward GEMMs, added
    whatever the policy and layout (see _op_level_recompute_s)."""
    output = _output_linear(attention)  # o
    # MLA: the key/value up projection stands for k (flops.op_level_key_weights)
    k = batch.add(tokens, ops.where(x.mla > 0, x.mla_kv_up_width / x.tp, x.kv_width_local),
                  ops.where(x.mla > 0, x.kv_lora_rank, x.hidden))
    up = batch.add(tokens, x.ffn_hidden / x.tp, x.hidden)
    return k, output[0], up


def _op_level_recompute_s(x: Inputs, gemm: dict[str, Any]):
    """(attention side, MLP side) forward GEMM time op-level selective recompute repeats per layer
    (see _op_level_recomputed_gemms); zero where selective recompute is not op-level. Applied here,
    not in `_gemm_times_s`, whose rows are shared by configurations that differ in recompute and
    sequence parallelism (GEMM_IGNORES)."""
    k, o, up = gemm["op_recompute"]
    redo_k, redo_o, redo_up = x.op_level_redone_linears
    active = op_level_recompute(x)
    return ops.where(active, redo_k * k + redo_o * o, 0.0), ops.where(active, redo_up * up, 0.0)


def _output_linear(block):
    """A block's output linear (o; the MLP's down projection): the last of its linears, any layout
    (every layout of a block ends in the same one)."""
    return block[-1] if type(block) is list else _output_linear(block[1])


def _projections(batch: GemmBatch, tokens, fan_in, whole_width, parts, fused, output):
    """A block's linears: those projecting one input to several outputs (q, k, v; gate and up), one
    GEMM of `whole_width` when `fused`, else one per part (`parts`: (width, how many linears of it)),
    and then `output`. With `fused` an array (rows of both layouts): (fused, both lists), which
    `passes` picks between."""
    def whole():
        return [batch.linear(tokens, fan_in, whole_width), output]

    def apart():  # equal linears (k and v; gate and up) share one GEMM shape, listed once per linear
        return [*(gemms for width, n in parts for gemms in [batch.linear(tokens, fan_in, width)] * n), output]

    # every row one layout (a plan's search): one list
    if type(fused) is np.ndarray and fused.size and fused.min() == fused.max():
        fused = fused.flat[0]
    if type(fused) is not np.ndarray:
        return whole() if fused else apart()
    return fused, whole(), apart()


def _layer_times_s(x: Inputs, p: ModelParameters, tokens, gemm):
    """Average forward, backward and recompute time of one transformer layer (GPU side)."""
    moe_fraction = x.n_moe_layers / x.n_layers
    attention_fwd, attention_bwd = gemm["attention_core"]
    elementwise_bytes = p.elementwise_traffic_factor * elementwise_bytes_per_token(x, p) / x.n_layers
    elementwise_fwd = tokens * elementwise_bytes / (x.hbm_bandwidth_gbs * 1e9)
    dequant = _qlora_dequant_s(x)
    gemm_fwd, gemm_bwd = (_mlp_mixed(gemm["attention"][i], gemm["dense_mlp"][i], gemm["moe_mlp"][i], moe_fraction)
                          for i in (0, 1))
    forward = ops.total((gemm_fwd, attention_fwd, elementwise_fwd, dequant))
    # the backward dequantizes again, unless the forward's 16-bit copy was saved for it (AutoGPTQ)
    backward = ops.total((gemm_bwd, attention_bwd, 2 * elementwise_fwd, dequant * (1 - x.dequant_saved_for_backward)))
    # selective: redo the attention core (Korthikanti et al. 2022 §5; Megatron-Core's core-attention
    # checkpoint, with flash attention too), or, under an op-level policy, the elementwise ops and
    # GEMMs whose outputs it drops (see _op_level_recomputed_gemms and memory.py)
    # full recompute under an early-stopping checkpoint skips the dense MLP's down projection
    full = x.full_recompute_share * (forward - x.checkpoint_early_stop * (1 - moe_fraction) * gemm["down_forward"])
    if type(x.recompute) is not np.ndarray and x.recompute != 1:  # one policy, and not selective
        return forward, backward, full if x.recompute == 2 else 0.0
    softmax_s = (1 - x.flash_attention) * tokens * 2 * x.activation_bytes * x.n_heads / x.tp * x.seq_len
    redone_attention, redone_mlp = _op_level_recompute_s(x, gemm)
    op_level = ops.total((elementwise_fwd, redone_attention, (1 - moe_fraction) * redone_mlp))
    # Megatron's core-attention checkpoint: the attention core again (with flash, its fused kernel)
    attention_only = x.redo_core_attn * (attention_fwd + softmax_s / (x.hbm_bandwidth_gbs * 1e9))
    if module_recompute.lists_modules(x):  # Megatron-Core's other recompute_modules
        attention_only = attention_only + module_recompute.redone_s(x, tokens, gemm)
    selective = ops.where(op_level_recompute(x), op_level, attention_only)
    recompute = ops.where(x.recompute == 2, full, ops.where(x.recompute == 1, selective, 0.0))
    return forward, backward, recompute


def _mlp_mixed(attention, dense, moe, moe_fraction):
    """attention + (1 − f)·dense + f·moe for the share f of MoE layers, where a single f of 0 or 1
    skips the side that is multiplied by zero (every GEMM time is finite, so it adds exactly 0)."""
    if type(moe_fraction) is not np.ndarray and moe_fraction in (0.0, 1.0):
        return attention + (dense if moe_fraction == 0.0 else moe)
    return attention + (1 - moe_fraction) * dense + moe_fraction * moe


def _qlora_dequant_s(x: Inputs):
    """A quantized base is dequantized to 16 bits before every use: `dequant_bytes_per_weight` of
    HBM traffic per frozen weight and use, at the streaming rate (see inputs.DEQUANT_BYTES_PER_WEIGHT
    and DEQUANT_STREAM_FRACTION). Only the layers' linears are stored quantized; the embedding, head
    and norms stay 16-bit and are never dequantized."""
    if not ops.any(x.quantized > 0):
        return 0.0
    per_layer = stage_linear_parameters(x) / ops.maximum(x.layers_per_stage, 1.0)
    return ops.where(x.quantized > 0, per_layer * x.dequant_bytes_per_weight / (x.hbm_bandwidth_gbs * 1e9), 0.0)


def _logits_times_s(x: Inputs, tokens, gemm):
    """Output projection and vocab-parallel cross-entropy (read 16-bit logits, write fp32
    log-softmax, and back: ~12 bytes per vocabulary entry per token; half that when the loss runs in
    the 16-bit training precision, `loss_upcast: false`)."""
    forward, backward, _ = gemm["logits"]
    per_entry = 12 * (1 - (1 - x.loss_upcast) * (1 - x.activation_bytes / 4))  # 1 upcast, bytes/4 not
    loss = tokens * x.vocab / x.tp * per_entry / (x.hbm_bandwidth_gbs * 1e9)
    half = loss / 2
    return forward + half, backward + half


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
    attention = ops.where(x.flash_attention > 0, 1.0, 3.0 + x.dropout + 4.0 * eager_softmax(x))
    tp_collectives = ops.where(x.tp > 1, 2.0 * (1 + x.sequence_parallel_active), 0.0)
    moe = 8.0 * x.n_moe_layers / x.n_layers  # router GEMM, top-k, permute, unpermute, grouped GEMMs
    elementwise = _elementwise_kernels(x)
    linears = x.linears_per_layer
    forward = linears + attention + elementwise + tp_collectives + moe
    weight_grads = ops.where(x.method == 0, linears, 0.0)
    backward = forward + weight_grads + ops.where(x.flash_attention > 0, 1.0, 2.0)
    modules = x.redo_core_attn * attention  # the attention core again, and the modules listed beside it
    if module_recompute.lists_modules(x):
        modules = modules + module_recompute.redone_kernels(x)
    selective = ops.where(op_level_recompute(x), _op_level_kernels(x), modules)
    # an early-stopping checkpoint skips the dense MLP's down projection and the residual add after it
    full = x.full_recompute_share * (forward - x.checkpoint_early_stop * 2 * (1 - x.n_moe_layers / x.n_layers))
    recompute = ops.where(x.recompute == 2, full, ops.where(x.recompute == 1, selective, 0.0))
    return forward, backward + recompute


def _elementwise_kernels(x: Inputs):
    """Fused elementwise kernels of one layer's forward: 2 norms, rotary on q and k, 2 residual adds,
    the activation; MLA adds its latent norms (1, or 2 with a query latent) and the 2
    concatenations that assemble q and k."""
    base = 2 + 2 * x.rope + 2 + 1
    if not ops.any(x.mla > 0):
        return base
    return base + x.mla * (3.0 + (x.q_lora_rank > 0))


def _op_level_kernels(x: Inputs):
    """Kernels op-level selective recompute launches again per layer: its GEMMs (k, o unless kept
    as the reduce-scattered output, a gated MLP's up projection, each where it is a linear of its
    own; see _op_level_recomputed_gemms),
    the elementwise kernels up to the last kept output (both norms, rotary, the attention residual
    add, the activation: all but the MLP's residual add) and TP's collective before them."""
    redo_k, redo_o, redo_up = x.op_level_redone_linears
    gemms = redo_k + redo_o + redo_up * (1.0 - x.n_moe_layers / x.n_layers)
    elementwise = 2 + 2 * x.rope + 1 + 1
    return gemms + elementwise + _op_level_tp_collectives(x)


def _op_level_tp_collectives(x: Inputs):
    """TP collectives op-level selective recompute repeats per layer, in all-reduce units: under
    sequence parallelism the all-gathers before the attention and MLP inputs (the policy keeps
    reduce-scatter outputs, not all-gather ones; two all-gathers move one all-reduce's bytes), else
    the all-reduce after the recomputed o."""
    return ops.where(op_level_recompute(x) & (x.tp > 1), 1.0, 0.0)


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


# ---- parallelism traffic ------------------------------------------------------------------------


def _tensor_parallel_s(x: Inputs, p: ModelParameters, tokens, layers, gemm):
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
    count = 4 + x.full_recompute_share * (2 - skipped) + _op_level_tp_collectives(x)
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
    return ops.where((x.tp_comm_overlap > 0) & (x.tp > 1), overlapped, exposed)


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
    mlp_fwd, mlp_bwd = ((1 - moe) * gemm["dense_mlp"][i] + moe * gemm["moe_mlp"][i] for i in (0, 1))
    # the input side's share of the block's GEMM FLOPs (MLA's replicated down projections counted
    # as if split: their share is small)
    qkv_share = 1 - x.n_heads * x.v_head_dim * x.hidden / attention_projection_weights(x)
    up = x.mlp_matrices - 1
    fc1_share = up / (up + 1)
    wgrad_share = ops.where(x.method == 0, 0.5, 0.0)  # frozen bases compute no weight gradient
    gather = comm.all_gather_time_s(nbytes, group)  # a reduce-scatter of the same bytes takes as long
    n = x.tp
    sm_share = ops.minimum(p.tp_overlap_comm_sms / x.compute_units, 0.5)
    splits = p.tp_overlap_rs_splits
    piece = comm.reduce_scatter_time_s(nbytes / splits, group)

    def ring(gemm_s):
        return ops.maximum(gather - gemm_s * (n - 1) / n, 0.0)

    def pipelined(gemm_s):
        slowed = gemm_s / (1 - sm_share)
        return piece + (splits - 1) * ops.maximum(piece - slowed / splits, 0.0) + (slowed - gemm_s)

    def bulk(gemm_s):
        return ops.maximum(gather - gemm_s, 0.0) + sm_share * ops.minimum(gather, gemm_s)

    after_down = pipelined(mlp_fwd * (1 - fc1_share))  # the reduce-scatter after FC2
    forward = (ring(attention_fwd * qkv_share) + pipelined(attention_fwd * (1 - qkv_share))
               + ring(mlp_fwd * fc1_share) + after_down)
    backward = (ring(attention_bwd * (1 - qkv_share) * (1 - wgrad_share))
                + ring(mlp_bwd * (1 - fc1_share) * (1 - wgrad_share))
                + bulk(attention_bwd * qkv_share * wgrad_share) + bulk(mlp_bwd * fc1_share * wgrad_share))
    # op-level selective recompute gathers the attention and MLP inputs again, beside the one
    # GEMM each that it redoes there (k; a gated MLP's up projection)
    redone_attention, redone_mlp = _op_level_recompute_s(x, gemm)
    op_level = ring(redone_attention) + ring((1 - moe) * redone_mlp)
    full = x.full_recompute_share * (forward - x.checkpoint_early_stop * after_down)  # early stop: no FC2 again
    recompute = ops.where(x.recompute == 2, full, ops.where(op_level_recompute(x), op_level, 0.0))
    if module_recompute.lists_modules(x):  # a recomputed MLP's gather and scatter, beside its GEMMs again
        recompute = recompute + module_recompute.redone_tp_units(x) * (ring(mlp_fwd * fc1_share) + after_down)
    return forward + backward + recompute


def _context_parallel_exposed_s(x, p, tokens, layers, attention_fwd, attention_bwd):
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
    `_context_parallel_exposed_s` left exposed; none for Ulysses, whose all-to-alls all show."""
    if not ops.any(x.cp > 1):
        return 0.0
    tokens = x.micro_batch * x.seq_len / x.cp
    passes = 3 + x.full_recompute_share
    total = x.layers_per_stage * passes * _context_parallel_pass_s(x, p, tokens)
    hidden = ops.where(x.cp_kind == 2, 0.0, ops.maximum(total - micro["cp_comm"], 0.0))
    return ops.where(x.cp > 1, hidden, 0.0)


def _expert_parallel_s(x: Inputs, p: ModelParameters, tokens):
    """MoE token dispatch and combine: 2 all-to-alls per MoE layer forward, 2 backward (+2 when
    recomputed), each moving tokens·top_k·hidden activations (Lepikhin et al. 2020, GShard)."""
    if not ops.any(x.ep > 1):
        return 0.0
    group = comm.GroupLinks(x.ep, x.etp * x.cp, x, p)
    dispatched = tokens * (x.etp / x.tp) * x.top_k * x.hidden * x.activation_bytes  # this rank's tokens
    per_all_to_all = comm.all_to_all_time_s(dispatched, group)
    count = 4 + 2 * x.full_recompute_share
    if module_recompute.lists_modules(x):  # a recomputed MoE layer dispatches and combines again
        count = count + module_recompute.redone_all_to_alls(x)
    return ops.where(x.ep > 1, x.moe_layers_per_stage * count * per_all_to_all, 0.0)


def _pipeline_comm_s(x: Inputs, p: ModelParameters):
    """Stage-to-stage activation sends on the critical path: forward and backward for each of the
    m·v micro-batch chunks a stage handles, plus the fill and drain across p−1 boundaries. Megatron
    scatters the activation over the TP ranks before sending (Narayanan et al. 2021 §4.1)."""
    if not ops.any(x.pp > 1):
        return 0.0
    tokens = x.micro_batch * x.seq_len / x.cp
    nbytes = tokens * x.hidden * x.activation_bytes / x.tp
    across_nodes = x.tp * x.cp * x.dp >= x.fabric_gpus  # a stage fills its scale-up fabric
    send = comm.p2p_time_s(nbytes, across_nodes & (x.n_fabrics > 1), x, p)
    sends = 2 * x.vpp * x.micro_batches + 2 * (x.pp - 1)
    return ops.where(x.pp > 1, sends * send, 0.0)


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
    issue_fwd, issue_bwd = host_issue_s(reference, p)
    free = ops.maximum(elapsed - _context_parallel_hidden_s(x, p, micro), 0.0) * p.dp_overlap_fraction
    share_fwd = issue_fwd / (issue_fwd + issue_bwd)
    return free * share_fwd, free * (1 - share_fwd)


def _data_parallel_exposed_s(x: Inputs, p: ModelParameters, micro) -> Any:
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
    ZeRO-1: reduce-scatter of gradients + all-gather of updated 16-bit weights, once per step.
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

    def buckets(count_dense, count_expert, element_bytes):
        # the framework's bucket of elements (DeepSpeed reduce_bucket_size), else dp_bucket_mb
        bucket_bytes = ops.where(x.dp_bucket_elements > 0, x.dp_bucket_elements * element_bytes, bucket_mb_bytes)
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
        gather, _ = units_of(comm.all_gather_time_s, trainable_dense, trainable_expert, x.weight_bytes,
                             buckets(trainable_dense, trainable_expert, x.weight_bytes))
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


# ---- optimizer and host side --------------------------------------------------------------------


def _optimizer_s(x: Inputs, p: ModelParameters):
    """The optimizer step streams its states through HBM (fused Adam: grads, fp32 master, m, v in,
    master, m, v and 16-bit weights out) — or, with ZeRO-Offload, runs on the host (`_cpu_adam_s`),
    after the gradients go down and the weights come back over PCIe (Ren et al. 2021 §4)."""
    trainable = sum(trainable_parameter_counts(x))
    shard = ops.where(x.zero >= 1, x.zero_shard, 1.0)
    local = trainable / shard
    step_bytes = x.optimizer_rw_bytes + ops.where(x.zero >= 3, x.zero3_step_extra_bytes, 0.0)
    on_gpu = local * step_bytes / (x.hbm_bandwidth_gbs * 1e9)
    offloaded = x.optimizer_offloaded
    if not ops.any(offloaded):  # every row steps on the GPU: no host step, no PCIe copies
        return on_gpu, 0.0
    transfers = local * (x.grad_bytes + x.weight_bytes) / (x.pcie_bandwidth_gbs * 1e9)
    return ops.where(offloaded, _cpu_adam_s(x, p, local), on_gpu), ops.where(offloaded, transfers, 0.0)


def _cpu_adam_s(x: Inputs, p: ModelParameters, local):
    """CPU-Adam over this GPU's `local` parameters, its process's share of the node (1 / GPUs per node)
    of the host's memory bandwidth and cores, all ranks stepping at once: the slower of streaming the
    states through host memory and the arithmetic at `cpu_adam_params_per_s_per_core` (Ren et al.
    2021 §5.1: vectorized, one OpenMP thread per core). Unknown bandwidth: 50 GB/s per GPU; unknown
    cores: the arithmetic is not modelled."""
    host_share = x.host_memory_bandwidth_gbs / x.gpus_per_node
    stream = local * x.optimizer_rw_bytes / (ops.nan_to_num(host_share, nan=50.0) * 1e9)
    cores = x.cpu_cores_per_node / x.gpus_per_node
    arithmetic = ops.nan_to_num(local / (cores * p.cpu_adam_params_per_s_per_core), nan=0.0)
    return ops.maximum(stream, arithmetic)


def _offload_exposed_s(x: Inputs, p: ModelParameters, micro) -> Any:
    """Traffic to host memory (or NVMe) that outlasts the compute it overlaps with, per step.

    Offloaded parameters are fetched for forward and again for backward (ZeRO-Infinity, FSDP
    cpu_offload), prefetched a layer ahead; offloaded activations go out during forward and come
    back during backward on a side stream (torchtune activation offloading)."""
    if not ops.any(x.parameters_offloaded | (x.activation_offload > 0)):
        return 0.0
    dense, experts = local_parameter_counts(x)
    shard = ops.where(x.zero >= 3, x.zero_shard, 1.0)
    link_gbs = ops.where(x.offload_nvme > 0, ops.fmin(x.pcie_bandwidth_gbs, x.storage_read_gbs), x.pcie_bandwidth_gbs)
    params_s = 2 * (dense + experts) * x.weight_bytes / shard / (link_gbs * 1e9)  # this GPU's shard, twice
    params_s = ops.where(x.parameters_offloaded, params_s, 0.0)
    saved, _ = activation_bytes_per_layer(x)
    out_and_back = 2 * saved * in_flight_layers(x)
    activations_s = ops.where(x.activation_offload > 0, out_and_back / (x.pcie_bandwidth_gbs * 1e9), 0.0)
    window = micro["forward"] + micro["backward"]
    return x.micro_batches * ops.maximum(params_s + activations_s - window, 0.0)


def _host_transfer_exposed_s(x: Inputs, gpu_busy):
    """Batches are copied from pinned memory ahead of use; only a copy longer than the step shows."""
    tokens = x.micro_batch * x.seq_len / x.cp
    copies = x.micro_batches * tokens * TOKEN_BATCH_BYTES / (x.pcie_bandwidth_gbs * 1e9)
    return ops.maximum(copies - gpu_busy, 0.0)


def _loading_nodes(x: Inputs):
    """Nodes that feed data: those hosting the first pipeline stage."""
    return ops.maximum(x.n_nodes / x.pp, 1.0)


def _data_loading_exposed_s(x: Inputs, p: ModelParameters, gpu_busy, host_issue_s):
    """What preparing the next batches adds to the step.

    With loader workers (PyTorch DataLoader `num_workers` > 0) they prepare batches while the
    GPUs work, and only what they cannot finish in a step shows. Without workers each training
    process loads its own share in its own loop, before the step: all of it shows. CPU: tokens
    over the cores that load × the per-core rate (`_loader_cores`); storage: the bytes of those
    tokens over the node's read rate. Unknown cores or storage are not modelled (NaN → 0)."""
    cores, storage = x.cpu_cores_per_node, x.storage_read_gbs
    if not ops.any((cores == cores) | (storage == storage)):
        return 0.0  # neither cores nor storage known (NaN) in any row: every term below is NaN → 0
    tokens_per_node = x.global_batch * x.seq_len / _loading_nodes(x)
    rate = ops.where(x.pretokenized > 0, x.collate_rate_per_core, x.tokenize_rate_per_core)
    read_s = ops.nan_to_num(tokens_per_node * p.bytes_per_token_on_disk / (x.storage_read_gbs * 1e9), nan=0.0)

    def with_workers():
        background_s = ops.nan_to_num(tokens_per_node / (_loader_cores(x, gpu_busy, host_issue_s) * rate), nan=0.0)
        return ops.maximum(ops.maximum(background_s, read_s) - gpu_busy, 0.0)

    def in_process():
        cores = ops.minimum(x.gpus_per_node, x.cpu_cores_per_node)
        return ops.maximum(ops.nan_to_num(tokens_per_node / (cores * rate), nan=0.0), read_s)

    workers = x.loader_workers_per_gpu
    if type(workers) is not np.ndarray:  # one loader setting: only its branch is computed
        return with_workers() if workers > 0 else in_process()
    return ops.where(workers > 0, with_workers(), in_process())


def _loader_cores(x: Inputs, gpu_busy, host_issue_s):
    """Cores a node's loader workers get: one each at most, out of what the training processes
    leave. A training process keeps a core busy only while it issues kernels (its share of the
    step, `host_issue_s / gpu_busy`); the rest of the time it waits on the GPU or the data queue.
    Fewer cores or fewer workers never load faster. Sizing rule: gpus × (workers + 1) cores and a
    few for the system (ml-engineering, compute/cpu)."""
    workers = x.loader_workers_per_gpu * x.gpus_per_node
    busy = _issuing_share(host_issue_s, gpu_busy)
    left = x.cpu_cores_per_node - x.gpus_per_node * busy
    # with fewer cores than busy processes, the scheduler time-slices: workers get their fair share
    fair_share = x.cpu_cores_per_node * workers / (x.gpus_per_node * busy + workers)
    return ops.minimum(workers, ops.maximum(left, fair_share))


def _checkpoint_s(x: Inputs):
    """A full checkpoint (16-bit weights + optimizer states), written in parallel by every node,
    amortized over the checkpoint interval; zero when storage or the interval is unknown."""
    per_node = x.checkpoint_bytes / x.n_nodes
    write_s = ops.nan_to_num(per_node / (x.storage_write_gbs * 1e9), nan=0.0)
    return write_s / x.checkpoint_interval_steps


def _host_ram_gb(x: Inputs, p: ModelParameters):
    """Host RAM a node needs: one training process and its loader workers per GPU, what is
    offloaded (optimizer states, weight shards, activations; NVMe offload still stages through
    pinned host buffers, counted as a tenth), and a staging copy of the node's checkpoint shard."""
    per_gpu = p.host_ram_per_gpu_process_gb + x.loader_workers_per_gpu * p.host_ram_per_loader_worker_gb
    processes = x.gpus_per_node * per_gpu
    dense, experts = local_parameter_counts(x)
    trainable = sum(trainable_parameter_counts(x))
    shard_states = ops.where(x.zero >= 1, x.zero_shard, 1.0)
    shard_weights = ops.where(x.zero >= 3, x.zero_shard, 1.0)
    states = ops.where(x.optimizer_offloaded, trainable / shard_states * x.optimizer_bytes, 0.0)
    weights = ops.where(x.parameters_offloaded, (dense + experts) / shard_weights * x.weight_bytes, 0.0)
    activations = 0.0
    if ops.any(x.activation_offload > 0):
        saved, _ = activation_bytes_per_layer(x)
        activations = ops.where(x.activation_offload > 0, saved * in_flight_layers(x), 0.0)
    offloaded = (ops.where(x.offload_nvme > 0, 0.1, 1.0) * (states + weights) + activations) * x.gpus_per_node / 1e9
    # a LoRA checkpoint holds the adapters only; the frozen base is read from the hub's files
    saved_params = ops.where(x.method == 0, x.params_total, trainable * x.pp * x.tp)
    staging = saved_params * x.weight_bytes / x.n_nodes / 1e9
    return processes + offloaded + staging
