"""The model core: `Inputs` (scalars or arrays) → step time, memory and FLOPs, all vectorized.

One micro-batch on one GPU of the slowest pipeline stage is the unit: its forward, backward and
recomputation (here and compute.py), the tensor/context/expert-parallel traffic on its critical
path (traffic.py), the host's kernel issue (host_issue.py), then the step: micro-batches × that,
the pipeline bubble, the exposed part of data-parallel traffic (traffic.py), the optimizer and the
host side (host_side.py). The `estimate` and `plan` paths share this code, so a plan and the
estimate of the job it describes agree exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainrig.estimate import host_issue, host_side, mamba, module_recompute, op_level, ops, traffic
from trainrig.estimate.compute import (
    GemmBatch,
    attention_time_s,
    elementwise_bytes_per_token,
)
from trainrig.estimate.distinct import per_distinct_row
from trainrig.estimate.flops import hardware_flops_per_token, model_flops_per_token
from trainrig.estimate.inputs import Inputs
from trainrig.estimate.memory import (
    MEMORY_PARTS,
    memory_fit,
    memory_state,
    op_level_recompute,
    stage_linear_parameters,
    trainable_parameter_counts,
)
from trainrig.estimate.params import ModelParameters

__all__ = ["evaluate", "Outputs", "STEP_PARTS", "MEMORY_PARTS"]

STEP_PARTS = ("compute", "launch_overhead", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "pp_bubble",
              "dp_comm", "data_loading", "host_transfer", "checkpoint", "cpu_optimizer", "other")


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
    memory_releasable_bytes: Any  # cached free blocks in that reserve, given back before an OOM
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
    # a micro-batch in the pipeline's fill and drain, which runs unpaired under moe_a2a_overlap
    per_micro = ops.total(micro[k] for k in ("compute", "launch_overhead", "tp_comm", "cp_comm", "ep_unpaired"))
    parts = {
        "compute": m * micro["compute"],
        "launch_overhead": m * micro["launch_overhead"],
        "tp_comm": m * micro["tp_comm"],
        "cp_comm": m * micro["cp_comm"],
        "ep_comm": m * micro["ep_comm"],
        "pp_comm": traffic.pipeline_comm_s(x, p, per_micro),
        "pp_bubble": _pipeline_bubble_s(x, per_micro, micro["weight_grad"]),
    }
    parts["dp_comm"] = traffic.data_parallel_exposed_s(x, p, micro)
    step_s, offload_s = host_side.optimizer_s(x, p)
    gpu_busy = ops.total(parts.values()) + step_s
    parts["data_loading"] = host_side.data_loading_exposed_s(x, p, gpu_busy, m * micro["host_issue"])
    parts["host_transfer"] = ops.total((host_side.host_transfer_exposed_s(x, gpu_busy), offload_s,
                                        host_side.offload_exposed_s(x, p, micro)))
    parts["checkpoint"] = host_side.checkpoint_s(x)
    # an offloaded optimizer steps on the host (ZeRO-Offload's CPU-Adam): its own part, so a step
    # the CPU holds back says so; the on-GPU step stays in `other` with the per-step overhead
    parts["cpu_optimizer"] = ops.where(x.optimizer_offloaded, step_s, 0.0)
    # (a − b as a + (−b), the same number: `total` leaves out a single zero)
    parts["other"] = ops.total((step_s, -parts["cpu_optimizer"])) + p.step_overhead_s
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
        host_ram_gb_per_node=host_side.host_ram_gb(memory_x, p) if with_memory else None,
        memory_allocated_bytes=state.get("allocated"),
        memory_reserved_bytes=state.get("reserved"),
        memory_paged_bytes=state.get("paged"),
        memory_releasable_bytes=state.get("releasable"),
        memory_peak_phase=state.get("phase"),
        gpu_busy_s=gpu_busy,
        launch_bound_fraction=micro["launch_bound_fraction"],
    )


def _memory(x: Inputs, p: ModelParameters):
    """The peak's state, its parts, the total and whether it fits (memory.py)."""
    state = memory_state(x, p)
    memory = {k: state[k] for k in MEMORY_PARTS}
    total_memory, _, fits = memory_fit(x, p, state)
    return state, memory, total_memory, fits


# ---- one micro-batch on one GPU -----------------------------------------------------------------


def _micro_batch(x: Inputs, p: ModelParameters) -> dict[str, Any]:
    tokens = x.micro_batch_tokens
    layers = x.layers_per_stage
    arithmetic = _arithmetic_s(x, p)
    compute = ops.total((arithmetic["compute"], _zero3_gradient_path_s(x)))
    tp = traffic.tensor_parallel_s(x, p, tokens, layers, arithmetic["gemm"])
    # (only attention layers exchange keys and values; Mamba layers' context parallelism is not counted)
    cp = traffic.context_parallel_exposed_s(x, p, tokens, layers * x.attention_share, *arithmetic["attention"])
    ep, ep_unpaired = traffic.expert_parallel_s(x, p, tokens, arithmetic["gemm"])
    gpu = ops.total((compute, tp, cp, ep))
    # The host issues every kernel while the GPU runs earlier ones; the overlap is imperfect, so
    # the pass outlasts the GPU's own time, by most when host and GPU need about as long: that
    # excess is launch overhead on the critical path.
    host_fwd, host_bwd = host_issue.host_issue_s(x, p)
    host = host_fwd + host_bwd
    sharing = host_issue.core_sharing(x, host, gpu)
    if type(sharing) is np.ndarray or sharing != 1.0:  # (1.0: enough cores, or an unknown count)
        host = host * sharing
    launch_overhead = ops.maximum(host_issue.overlapped_s(host, gpu, p.host_gpu_overlap_exponent) - gpu, 0.0)
    elapsed = compute + launch_overhead
    # the passes' kernels as launched one by one, which CUDA graphs replay in fewer launches
    issued_fwd, issued_bwd = host_fwd, host_bwd
    if host_issue.any_graphs(x):
        issued_fwd, issued_bwd = host_issue.host_issue_s(host_issue.ungraphed(x), p)
    issued = issued_fwd + issued_bwd
    return {
        "compute": compute,
        "weight_grad": arithmetic["weight_grad"],
        "launch_overhead": launch_overhead,
        # The windows data-parallel traffic can hide under: the micro-batch's elapsed compute, split
        # between the passes in proportion to their kernels (a fixed share, so a faster GPU or CPU
        # never lengthens the step through a shorter window alone).
        "forward": elapsed * issued_fwd / issued,
        "backward": elapsed * issued_bwd / issued,
        "tp_comm": tp,
        "cp_comm": cp,
        "ep_comm": ep,
        "ep_unpaired": ep_unpaired,
        "launch_bound_fraction": ops.where(host > gpu, 1 - gpu / host, 0.0),
        "host_issue": host,
    }


# Fields the GEMM and attention-core timing never reads (`_gemm_times_s`): the pipeline and
# data-parallel layout, memory savers, links, host and memory capacity. A planner's rows that differ
# only in these share their GEMM times, which are then computed once (see distinct.py).
GEMM_IGNORES = frozenset({
    "pp", "dp", "vpp", "pp_embedding_slot", "pp_loss_slot", "pp_local_batch", "global_batch", "zero", "recompute",
    "sequence_parallel", "tp_comm_overlap", "cp_kind", "gpus_per_node", "n_nodes", "fabric_gpus", "n_fabrics",
    "recompute_num_layers", "moe_dispatcher", "moe_a2a_overlap", "graph_full", "graph_attention",
    "graph_mlp", "graph_moe", "graph_router", "activation_offload_layers",
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
    tokens = x.micro_batch_tokens
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
    weight_grad = x.layers_per_stage * _layer_mixed(x, *(gemm[block][2] for block in LAYER_BLOCKS))
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
    fewer per bubble micro-batch; with vpp > 1 per chunk alike. A step that runs the schedule more than
    once (`pipeline_runs`) pays a bubble per run."""
    if not ops.any(x.pp > 1):
        return 0.0
    filled = ops.where(x.pp_schedule == 2, ops.maximum(per_micro - 2 * weight_grad, 0.0), per_micro)
    # one bubble per run of the schedule (training.pp_local_batch: torch.distributed.pipelining's step())
    return x.pipeline_runs * (x.pp - 1) / x.vpp * filled


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


def _gemm_times_s(x: Inputs, p: ModelParameters, with_op_level: bool = True) -> dict[str, Any]:
    """Every GEMM of one layer and of the output head, timed in one vectorized call, and the
    layer's attention core (`attention_core`: forward, backward; see compute.attention_time_s).

    Returns forward and backward times per block: attention projections, dense MLP, MoE MLP
    (routed experts as a grouped GEMM over this GPU's experts, plus shared experts and the router;
    tokens assumed balanced: tokens·top_k routed rows spread over n_experts/ep local experts, each
    sharded over tp), and the logits. Frozen weights (LoRA/QLoRA) skip their weight gradients.
    `with_op_level`: also time the GEMMs op-level selective recompute redoes (`op_recompute`), which
    the caller asks for when any configuration runs that policy; else they are zero.
    """
    tokens = x.micro_batch_tokens
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
    local_experts = x.local_experts
    # an expert TP group of etp ranks computes the tokens of etp/tp tensor-parallel groups
    rows = tokens * x.top_k / local_experts * (x.etp / x.tp)
    width = x.expert_ffn_hidden / x.etp
    experts = [tuple(batch.add(m, n, k, local_experts) for m, n, k in (
        (rows, up_width * width, x.hidden), (rows, x.hidden, up_width * width), (x.hidden, up_width * width, rows))),
        tuple(batch.add(m, n, k, local_experts) for m, n, k in (
            (rows, x.hidden, width), (rows, width, x.hidden), (width, x.hidden, rows)))] if any_moe else []
    if not any_moe:
        shared, router = [], []
    mixer = _mamba_gemms(batch, x, tokens) if ops.any(x.n_mamba_layers > 0) else None
    logits = [batch.linear(tokens, x.hidden, x.vocab / x.tp, head=True)]
    # multi-token prediction's projection of [norm(h); norm(embedding)], split over TP
    mtp_projection = [batch.linear(tokens, 2 * x.hidden, x.hidden / x.tp)] if ops.any(x.mtp_layers > 0) else []
    redone = _op_level_recomputed_gemms(batch, x, tokens, attention) if with_op_level else None
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
            **_mamba_entries(passes, t, mixer),
            "attention_core": attention_time_s(tokens, x.n_heads / x.tp, x, p),
            "op_recompute": (0.0, 0.0, 0.0) if redone is None else tuple(t[g] for g in redone),
            "mtp_projection": passes(mtp_projection) if mtp_projection else (0.0, 0.0, 0.0),
            # what Megatron-Core's recompute_modules redo (their forward; module_recompute.py)
            "mla_up": passes(mla_up) if mla_up else (0.0, 0.0, 0.0),
            "shared_mlp": passes(shared) if shared else (0.0, 0.0, 0.0),
            "down_forward": t[_output_linear(dense)[0]]}


def _mamba_gemms(batch: GemmBatch, x: Inputs, tokens):
    """A Mamba-2 mixer's GEMMs added to `batch` (mamba.py): its in and out projections, split over
    TP by heads and groups (column- then row-parallel, as attention's), and the SSD scan's chunk
    products with their gradients. Returns (linears, scan forward, scan gradients)."""
    linears = [batch.linear(tokens, x.hidden, x.mamba_in_width / x.tp),
               batch.linear(tokens, x.mamba_inner / x.tp, x.hidden)]
    shapes = mamba.scan_gemms(x, tokens)
    scan = [batch.add(*shape) for shape in shapes]
    gradients = [batch.add(*g) for shape in shapes for g in mamba.gradient_gemms(shape)]
    return linears, scan, gradients


def _mamba_entries(passes, t, mixer):
    """The mixer's "mamba" and "mamba_linears" entries, each (forward, backward, of which the
    weight gradients): the whole mixer, its linears and the scan's products, and the linears alone.
    The backward computes C·Bᵀ and the chunk states again (mamba.py: the memory-efficient path
    recomputes them) beside the gradient products. Zero without a mixer."""
    if mixer is None:
        return {"mamba": (0.0, 0.0, 0.0), "mamba_linears": (0.0, 0.0, 0.0)}
    linears, scan, gradients = mixer
    forward, backward, weight_grads = linear_passes = passes(linears)
    chunk_states = t[scan[0]] + t[scan[1]]  # mamba.scan_gemms: C·Bᵀ and Bᵀ·x, the chunk's state
    scan_s = ops.total(t[g] for g in scan)
    whole = (forward + scan_s, backward + chunk_states + ops.total(t[g] for g in gradients), weight_grads)
    return {"mamba": whole, "mamba_linears": linear_passes}


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
    whatever the policy and layout (see op_level.redone_gemm_s)."""
    output = _output_linear(attention)  # o
    # MLA: the key/value up projection stands for k (flops.op_level_key_weights)
    k = batch.add(tokens, ops.where(x.mla > 0, x.mla_kv_up_width / x.tp, x.kv_width_local),
                  ops.where(x.mla > 0, x.kv_lora_rank, x.hidden))
    up = batch.add(tokens, x.ffn_hidden / x.tp, x.hidden)
    return k, output[0], up


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
    """Average forward, backward and recompute time of one layer (GPU side)."""
    attention_fwd, attention_bwd = gemm["attention_core"]
    if ops.any(x.hybrid > 0):  # the attention core in a hybrid's attention layers only
        attention_fwd, attention_bwd = (ops.where(x.hybrid > 0, x.attention_share * t, t)
                                        for t in (attention_fwd, attention_bwd))
    elementwise_bytes = p.elementwise_traffic_factor * elementwise_bytes_per_token(x, p) / x.n_layers
    elementwise_fwd = tokens * elementwise_bytes / (x.hbm_bandwidth_gbs * 1e9)
    dequant = _qlora_dequant_s(x)
    gemm_fwd, gemm_bwd = (_layer_mixed(x, *(gemm[block][i] for block in LAYER_BLOCKS)) for i in (0, 1))
    forward = ops.total((gemm_fwd, attention_fwd, elementwise_fwd, dequant))
    # the backward dequantizes again, unless the forward's 16-bit copy was saved for it (AutoGPTQ)
    backward = ops.total((gemm_bwd, attention_bwd, 2 * elementwise_fwd, dequant * (1 - x.dequant_saved_for_backward)))
    # selective: redo the attention core (Korthikanti et al. 2022 §5; Megatron-Core's core-attention
    # checkpoint, with flash attention too), or, under an op-level policy, the elementwise ops and
    # GEMMs whose outputs it drops (see _op_level_recomputed_gemms and memory.py)
    # full recompute under an early-stopping checkpoint skips the dense MLP's down projection
    full = x.full_recompute_share * (forward - x.checkpoint_early_stop * x.dense_share * gemm["down_forward"])
    if type(x.recompute) is not np.ndarray and x.recompute != 1:  # one policy, and not selective
        return forward, backward, full if x.recompute == 2 else 0.0
    softmax_s = (1 - x.flash_attention) * tokens * 2 * x.activation_bytes * x.n_heads / x.tp * x.seq_len
    softmax_s = softmax_s * x.attention_share  # (1 but in a hybrid)
    redone_attention, redone_mlp = op_level.redone_gemm_s(x, gemm)
    op_level_redo = ops.total((elementwise_fwd, redone_attention, x.dense_share * redone_mlp))
    # Megatron's core-attention checkpoint: the attention core again (with flash, its fused kernel)
    attention_only = x.redo_core_attn * (attention_fwd + softmax_s / (x.hbm_bandwidth_gbs * 1e9))
    if module_recompute.lists_modules(x):  # Megatron-Core's other recompute_modules
        attention_only = attention_only + module_recompute.redone_s(x, tokens, gemm)
    selective = ops.where(op_level_recompute(x), op_level_redo, attention_only)
    recompute = ops.where(x.recompute == 2, full, ops.where(x.recompute == 1, selective, 0.0))
    return forward, backward, recompute


# a layer's GEMM blocks, as _gemm_times_s times them and _layer_mixed weighs them
LAYER_BLOCKS = ("attention", "dense_mlp", "moe_mlp", "mamba")


def _layer_mixed(x: Inputs, attention, dense, moe, mixer):
    """An average layer from its blocks' times: attention + (1 − f)·dense + f·moe for the share f
    of MoE layers, where a single f of 0 or 1 skips the side that is multiplied by zero (every GEMM
    time is finite, so it adds exactly 0); in a hybrid every block weighted by its share of the
    layers, the Mamba-2 mixers' too."""
    moe_fraction = x.n_moe_layers / x.n_layers
    if type(moe_fraction) is not np.ndarray and moe_fraction in (0.0, 1.0):
        mixed = attention + (dense if moe_fraction == 0.0 else moe)
    else:
        mixed = attention + x.dense_share * dense + moe_fraction * moe
    if not ops.any(x.hybrid > 0):
        return mixed
    hybrid = x.attention_share * attention + x.dense_share * dense + moe_fraction * moe + x.mamba_share * mixer
    return ops.where(x.hybrid > 0, hybrid, mixed)


def _qlora_dequant_s(x: Inputs):
    """A quantized base is dequantized to 16 bits before every use: `dequant_bytes_per_weight` of
    HBM traffic per frozen weight and use, at the streaming rate (see job_fields.DEQUANT_BYTES_PER_WEIGHT
    and DEQUANT_STREAM_FRACTION). Only the layers' linears are stored quantized; the embedding, head
    and norms stay 16-bit and are never dequantized."""
    if not ops.any(x.quantized > 0):
        return 0.0
    per_layer = stage_linear_parameters(x) / ops.maximum(x.layers_per_stage, 1.0)
    return ops.where(x.quantized > 0, per_layer * x.dequant_bytes_per_weight / (x.hbm_bandwidth_gbs * 1e9), 0.0)


def _logits_times_s(x: Inputs, tokens, gemm):
    """Output projection and vocab-parallel cross-entropy (read 16-bit logits, write fp32
    log-softmax, and back: ~12 bytes per vocabulary entry per token; half that when the loss runs in
    the 16-bit training precision, `loss_upcast: false`). A shifted contiguous copy of the logits
    (`loss_shift_copy`) reads and writes one more element per entry forward, and its backward writes
    a zeroed full-size gradient and copies the shifted one into it: 8 and 12 bytes more (fp32)."""
    forward, backward, _ = gemm["logits"]
    scale = 1 - (1 - x.loss_upcast) * (1 - x.activation_bytes / 4)  # 1 upcast, bytes/4 not
    byte_per_entry_s = tokens * x.vocab / x.tp / (x.hbm_bandwidth_gbs * 1e9)  # one byte per local logit
    half = byte_per_entry_s * 6 * scale
    copy_fwd, copy_bwd = (byte_per_entry_s * b * scale * x.loss_shift_copy for b in (8.0, 12.0))
    return forward + half + copy_fwd, backward + half + copy_bwd
