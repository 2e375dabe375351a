"""A job flattened into numbers: the one input of the vectorized model core.

Every field is a float or a numpy array of floats; the core broadcasts them, so one `Inputs` can
describe one configuration (the `estimate` path) or a hundred thousand (the planner). Categorical
choices become numbers (recompute 0/1/2, flags 0/1; job_fields.py turns a job's specs into them),
so the core has no Python branches on data.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

import numpy as np

from trainrig.estimate import job_fields, ops
from trainrig.estimate.params import ModelParameters
from trainrig.specs import Job
from trainrig.specs.job import RECOMPUTE_MODULES

__all__ = ["Inputs", "inputs_from_job", "stack_inputs", "mla_kv_up_width", "attended_keys"]


@dataclass(frozen=True)
class Inputs:
    """Numbers the model core needs. Units are in the names; counts are plain."""

    # model shape
    n_layers: Any
    n_moe_layers: Any
    hidden: Any
    n_heads: Any
    kv_heads: Any
    head_dim: Any  # query/key width per head
    v_head_dim: Any  # value (and attention-output) width per head
    rope_head_dim: Any  # rotary part of each query/key head (all of it but under MLA)
    mla: Any  # 1 = multi-head latent attention (ModelSpec.kv_lora_rank)
    q_lora_rank: Any  # MLA's query latent (0 = queries straight from the hidden state)
    kv_lora_rank: Any  # MLA's key/value latent (0 without MLA)
    ffn_hidden: Any
    mlp_matrices: Any  # 3 gated, 2 plain
    vocab: Any
    context_len_cap: Any  # sliding window, or inf
    windowed_share: Any  # share of the layers the window applies to (ModelSpec.windowed_layer_share)
    rope: Any  # 1 when rotary embeddings are applied to q and k
    n_experts: Any
    top_k: Any
    expert_ffn_hidden: Any
    n_shared_experts: Any
    shared_ffn_hidden: Any
    # parameter counts (whole model)
    params_total: Any
    params_attention_per_layer: Any  # split over tensor parallelism
    params_attention_replicated_per_layer: Any  # whole on every TP rank (MLA's down projections, latent norms)
    params_dense_mlp_per_layer: Any
    params_expert: Any  # one routed expert
    params_moe_shared_per_layer: Any  # shared experts + router of one MoE layer
    params_norms_per_layer: Any  # averaged over the layers: 2 per transformer layer, 1 per hybrid block
    params_final_norm: Any
    # layer kinds (ModelSpec.layer_pattern): counts, shares of the layers, and the Mamba-2 shape
    hybrid: Any  # 1 = one block per layer, as a pattern gives them
    n_attention_layers: Any
    n_mamba_layers: Any
    n_dense_mlp_layers: Any
    blocks_per_layer: Any  # pre-norm residual blocks per layer: 2 (attention + MLP), 1 in a hybrid
    dense_share: Any  # layers with a dense MLP over all layers
    attention_share: Any
    mamba_share: Any
    mlp_share: Any  # layers with an MLP, dense or MoE
    mamba_inner: Any  # d_inner = heads × head width
    mamba_heads: Any
    mamba_head_dim: Any
    mamba_state: Any
    mamba_groups: Any
    mamba_conv: Any
    mamba_chunk: Any
    mamba_in_width: Any  # in_proj outputs: z, x, B, C, dt
    params_embedding: Any
    tied_embeddings: Any  # 1 when the output head shares the embedding matrix
    # training
    seq_len: Any
    micro_batch: Any
    global_batch: Any
    tp: Any
    pp: Any
    cp: Any
    ep: Any
    expert_tp: Any  # tensor-parallel degree of the routed experts (TrainingSpec.expert_tp); 0 = tp
    dp: Any
    vpp: Any
    pp_embedding_slot: Any  # 1: the embedding takes a layer-slot of the pipeline split (see TrainingSpec)
    pp_loss_slot: Any  # 1: the output layer and loss take one
    mtp_layers: Any  # multi-token prediction modules on the last stage (TrainingSpec.mtp_layers)
    pipeline_explicit: Any  # 1: TrainingSpec.pipeline_layers gives each stage's layers
    pipeline_first_layers: Any  # its first stage's layers (beside the embedding)
    pipeline_last_layers: Any  # its last stage's (beside the output head)
    pipeline_max_layers: Any  # its fullest stage's
    pp_schedule: Any  # PP_SCHEDULE_CODE: 0 1F1B (interleaved with vpp > 1), 1 GPipe, 2 ZB-H1
    pp_local_batch: Any  # sequences per pipeline schedule run (TrainingSpec.pp_local_batch); 0 = the whole step
    zero: Any
    recompute: Any
    recompute_num_layers: Any  # layers per stage (chunk) full recompute redoes; inf = every one
    dp_shard: Any  # data-parallel ranks a ZeRO/FSDP shard group spans (HSDP); dp = all of them
    sequence_parallel: Any
    tp_comm_overlap: Any  # 1 = TP collectives chunked beside their GEMMs (see TrainingSpec)
    cp_kind: Any  # CP_KIND_CODE: 0 ring, 1 all-gather, 2 ulysses
    moe_dispatcher: Any  # MOE_DISPATCHER_CODE: 0 alltoall, 1 allgather, 2 deduplicated (deepep, hybridep)
    moe_a2a_overlap: Any  # 1 when one micro-batch's forward runs beside another's backward (combined 1F1B)
    graph_full: Any  # 1 when one CUDA graph captures every micro-batch's forward and backward
    graph_attention: Any  # 1 when each layer's attention block is a CUDA graph (scope attn or layer)
    graph_mlp: Any  # 1 when each dense layer's MLP block is (mlp or layer)
    graph_moe: Any  # 1 when each MoE layer's MLP block is, dispatch and experts included (moe or layer)
    graph_router: Any  # 1 when each MoE layer's norm and router are (moe_router)
    flash_attention: Any
    flash_attention_version: Any  # 1 or 2 (see TrainingSpec)
    attention_fwd_speed: Any  # fused kernel's forward rate relative to FlashAttention-2's (GPU.attention_kernel_speed)
    attention_bwd_speed: Any  # … and its backward's
    fp8_cast_bytes: Any  # HBM bytes per element of casting a GEMM input to fp8/fp4 (FP8_CAST_BYTES; 0 in 16 bits)
    fused_kernels: Any  # 1 = fused elementwise kernels, 0 = eager (see TrainingSpec)
    dropout: Any
    activation_bytes: Any  # bytes per activation element (2 for 16-bit, 4 for fp32)
    weight_bytes: Any
    grad_bytes: Any
    optimizer_bytes: Any  # optimizer state per trainable parameter (incl. fp32 master copy)
    optimizer_rw_bytes: Any  # bytes the optimizer step reads+writes per local parameter
    fp8: Any
    method: Any
    lora_rank: Any
    unquantized_weight_bytes: Any  # bytes per frozen weight a quantizer leaves alone (embedding, head, norms)
    frozen_weight_bytes: Any  # bytes per frozen layer-linear weight: 2 (16-bit), ~0.516 (NF4 + double quant) …
    quantized: Any  # 1 when the frozen base is quantized (dequantized per use)
    dequant_bytes_per_weight: Any  # one dequantization's HBM bytes per weight at the stream rate (DEQUANT_*)
    dequant_saved_for_backward: Any  # 1 when autograd keeps the 16-bit dequantized weight (AutoGPTQ's torch path)
    dequant_ops: Any  # small ops one dequantization issues (DEQUANT_OPS)
    lora_q: Any  # 1 when the linear carries an adapter (see TrainingSpec.lora_targets)
    lora_k: Any
    lora_v: Any
    lora_o: Any
    lora_gate: Any
    lora_up: Any
    lora_down: Any
    lora_dropout: Any  # 1 when the LoRA branch applies dropout to its input (copies it for backward)
    lora_output_dropout: Any  # 1 when it applies dropout to B's output instead (a 1-byte mask kept)
    pp_p2p_overlap: Any  # 1 = interleaved pipeline sends beside the next chunk (FrameworkSpec.pp_p2p_overlap)
    tp_dtensor_eager: Any  # 1 = TP through uncompiled DTensors (FrameworkSpec.tp_dtensor, TrainingSpec.compile)
    lora_forward_ops: Any  # host time of one adapter's forward, in eager ops (FrameworkSpec.lora_adapter_host_ops)
    moe_router_ops_fwd: Any  # an MoE router's small ops beyond its GEMM and top-k (FrameworkSpec.moe_router_host_ops)
    moe_router_ops_bwd: Any
    moe_layer_ops_fwd: Any  # the dispatcher's, beyond the layer's kernels (FrameworkSpec.moe_layer_host_ops)
    moe_layer_ops_bwd: Any
    moe_expert_ops_fwd: Any  # … per local expert, fp8 quantization included (FrameworkSpec.moe_expert_host_ops)
    moe_expert_ops_bwd: Any
    lora_backward_ops: Any  # … and of its backward
    fused_qkv: Any  # 1 = q, k and v projected by one linear (see ModelSpec.fused_qkv); 0 = three
    fused_gate_up: Any  # 1 = a gated MLP's gate and up as one linear; 0 = two
    train_embeddings: Any
    embedding_state_bytes: Any  # optimizer moments per trained embedding weight (kept in the model's precision)
    master_weights: Any  # 1 = fp32 master copy (mixed precision); 0 = pure low precision
    paged_optimizer: Any  # 1 = states in CUDA unified memory, outside the allocator
    optimizer_in_backward: Any
    loss_kind: Any  # 0 full, 1 chunked, 2 fused linear + cross-entropy, 3 fused kernel over the logits
    loss_upcast: Any  # 1 = the full loss's log-softmax and gradients in fp32; 0 = in the training precision
    loss_shift_copy: Any  # 1 = the full loss runs on a shifted contiguous copy of its (upcast) logits
    activation_offload: Any
    activation_offload_layers: Any  # of a stage's layers, how many offload (inf = all)
    offload: Any  # 0 none, 1 optimizer, 2 parameters, 3 all
    offload_nvme: Any
    real_seq_len: Any  # real tokens per sample (packing, or mean_seq_len)
    compute_seq_len: Any  # tokens per sample as computed (padded to the longest in the micro-batch)
    packed_sample_len: Any  # mean tokens per packed sample attending only within itself; inf = causal over seq_len
    persistent_grad_buffer: Any  # framework facts (trainrig.specs.framework)
    fsdp_unsharded_accumulation: Any
    fsdp_frozen_params_get_grads: Any
    fused_qkv_view_saved: Any
    eager_norm_upcast: Any
    swiglu_saves_activation: Any
    selective_recompute_ops: Any  # 1 = selective recompute with flash attention is op-level; 0 = attention only
    checkpoint_early_stop: Any  # 1 = full recompute skips the block's last matmul (non-reentrant early stop)
    # selective recompute by module (training.recompute_modules; estimate/module_recompute.py): 1 = redone
    redo_core_attn: Any
    redo_mla_up_proj: Any
    redo_layernorm: Any
    redo_moe_act: Any
    redo_mlp: Any
    redo_moe: Any
    redo_shared_experts: Any
    zero3_module_fetch_us: Any
    zero3_gather_host_ops: Any  # host ops per gathered parameter and gather when sharded over > 1 rank
    zero3_grad_full_passes: Any  # ZeRO-3 HBM passes over the whole 16-bit gradient per micro-batch
    zero3_grad_shard_passes: Any  # ... and over this rank's shard of it (accumulation)
    zero3_step_extra_bytes: Any  # ZeRO-3 optimizer-step bytes per local parameter beyond the fused update
    dp_bucket_elements: Any  # framework's gradient bucket (elements); 0 = the model's dp_bucket_mb
    dp_bucket_elements_per_rank: Any  # bucket growth per data-parallel rank (elements; 0: fixed)
    dp_param_gather_overlap: Any  # 1: ZeRO-1/2's weight all-gather beside the next forward
    fsdp_unsharded_under_pp: Any  # 1 = FSDP keeps a stage's weights gathered, its gradients unsharded, under PP
    tp_overlap_micro_pipeline: Any  # 1 = TP overlap by PyTorch's micro-pipeline (async) TP (FrameworkSpec)
    zero3_16bit_shard_copy: Any  # 1 = a 16-bit shard beside the fp32 master (DeepSpeed); 0 = FSDP
    fp8_all_gather: Any  # 1 = FSDP gathers the fp8 linears' weights in fp8 (see TrainingSpec)
    saved_input_bytes: Any  # bytes per element of a linear's input kept for its weight gradient
    loss_parallel_bytes: Any  # bytes per local logit of a TP loss_parallel cross-entropy; 0 = PyTorch's own
    loss_bytes: Any  # bytes per local logit of the stack's own full cross-entropy at any TP; 0 = PyTorch's own
    quantized_linear_saves_input: Any
    pretokenized: Any
    checkpoint_interval_steps: Any  # inf when no checkpoints are modelled
    loader_workers_per_gpu: Any
    # GPU
    gemm_peak_tflops: Any  # dense peak for the GEMM precision
    head_gemm_peak_tflops: Any  # … for the output head, which fp8 recipes keep in bf16
    head_matmul_efficiency: Any  # the head's best-shape fraction of that peak
    attention_peak_tflops: Any  # dense peak of the precision attention runs in (bf16 for fp8)
    mfu_peak_tflops: Any
    matmul_efficiency: Any  # best-shape fraction of peak (MAMF), before tile effects
    attention_efficiency: Any  # fused attention's fraction of attention_peak_tflops
    compute_units: Any
    hbm_bandwidth_gbs: Any  # effective (datasheet × efficiency, or measured)
    memory_gib: Any
    # links (effective GB/s per direction, latency in µs)
    intra_bandwidth_gbs: Any
    intra_latency_us: Any
    scale_up_domain: Any  # GPUs the intra-node link joins; larger groups use PCIe between domains
    pcie_peer_gbs: Any  # GPU↔GPU over PCIe, for traffic between scale-up domains
    inter_node_bandwidth_gbs: Any  # whole node, all ports
    inter_latency_us: Any
    pcie_bandwidth_gbs: Any  # per GPU, after sharing a switch
    pcie_latency_us: Any
    gpus_per_node: Any
    n_nodes: Any
    fabric_gpus: Any  # GPUs one scale-up fabric joins: the node, or whole nodes of a rack (NVL72)
    n_fabrics: Any  # scale-up fabrics the job spans: the nodes, or the racks
    # host
    cpu_cores_per_node: Any  # nan = unknown (not modelled)
    host_memory_bandwidth_gbs: Any  # per node; nan = unknown
    storage_read_gbs: Any  # per node; nan = unknown
    storage_write_gbs: Any
    ram_gb_per_node: Any
    collate_rate_per_core: Any
    tokenize_rate_per_core: Any
    kernel_launch_us: Any

    @classmethod
    def from_numbers(cls, values: dict[str, Any]) -> Inputs:
        """Inputs from a dict holding every field, set directly: the frozen dataclass's `__init__`
        sets ~150 fields one `object.__setattr__` at a time, a third of flattening a job."""
        if values.keys() != _FIELD_NAMES:
            missing, unknown = _FIELD_NAMES - values.keys(), values.keys() - _FIELD_NAMES
            raise TypeError(f"Inputs fields missing {sorted(missing)[:3]}, unknown {sorted(unknown)[:3]}")
        made = object.__new__(cls)
        made.__dict__.update(values)
        return made

    def with_values(self, **changes: Any) -> Inputs:
        """A copy with some fields changed. Copies the field dict rather than calling `__init__`
        with all ~150 fields (`dataclasses.replace`): the estimate path does this on every call."""
        unknown = changes.keys() - _FIELD_NAMES
        if unknown:
            raise TypeError(f"Inputs has no field {sorted(unknown)[0]!r}")
        copy = object.__new__(Inputs)
        copy.__dict__.update(self.__dict__)
        for name in _CACHED:  # derived from fields that may change
            copy.__dict__.pop(name, None)
        copy.__dict__.update(changes)
        return copy

    # ---- derived from the layout, so a planner can vary tp/pp/dp/batch as arrays ----------------

    @property
    def micro_batches(self):
        """Micro-batches per optimizer step on one pipeline (gradient accumulation steps)."""
        return self.global_batch / (self.micro_batch * self.dp)

    @property
    def pipeline_runs(self):
        """Runs of the pipeline schedule per optimizer step, each filling and draining the pipeline:
        global_batch / (dp · pp_local_batch), at least 1; 1 when the step is one schedule."""
        runs = self.global_batch / (self.dp * ops.where(self.pp_local_batch > 0, self.pp_local_batch, 1.0))
        return ops.where(self.pp_local_batch > 0, ops.maximum(runs, 1.0), 1.0)

    @property
    def zero_shard(self):
        """Ranks one ZeRO/FSDP shard group spans: dp_shard · cp (all of dp · cp without HSDP)."""
        return ops.minimum(self.dp_shard, self.dp) * self.cp

    @property
    def dp_replicas(self):
        """Copies of each shard group under HSDP (1 without it), whose gradient shards are all-reduced."""
        return self.dp * self.cp / self.zero_shard

    @cached_property
    def full_recompute_share(self):
        """Share of the fullest stage's layers that full recompute redoes: recompute_num_layers per
        model chunk (Megatron's block method) over the chunk's layers, at most all; 0 without full
        recompute."""
        share = ops.minimum(self.recompute_num_layers * self.vpp / ops.maximum(self.layers_per_stage, 1.0), 1.0)
        return ops.where(self.recompute == 2, share, 0.0)

    @cached_property
    def layers_per_stage(self):
        """Transformer layers on the fullest pipeline stage, which paces the step and peaks in memory.

        The n layers (plus a slot each for the embedding and the loss where they count) split into
        pp·vpp chunks as evenly as they go: ceil((n + slots) / (pp·vpp)) per chunk, vpp chunks per
        stage. Equal to n / pp when pp·vpp divides n (Megatron-Core's split; an uneven one puts the
        extra layers on some stages, e.g. decoder_first/last_pipeline_num_layers)."""
        # with pp = 2 and both slots there is no middle stage: each stage gives one slot to an end
        return self.stage_slots - ops.where(self.pp == 2, self.pp_embedding_slot * self.pp_loss_slot, 0.0)

    @cached_property
    def stage_slots(self):
        """Layer-slots per pipeline stage: vpp·ceil((n + slots) / (pp·vpp)); n on one stage; the
        fullest stage's layers of an explicit split."""
        slots = ops.where(self.pp > 1, self.pp_embedding_slot + self.pp_loss_slot, 0.0)
        per_chunk = ops.ceil((self.n_layers + slots) / (self.pp * self.vpp))
        even = ops.where(self.pp > 1, per_chunk * self.vpp, self.n_layers)
        return ops.where(self.pipeline_explicit > 0, self.pipeline_max_layers, even)

    @cached_property
    def first_stage_layers(self):
        """Transformer layers beside the embedding on the first stage: the fullest stage's, less the
        layer the embedding's slot takes; an explicit split's first count."""
        slotted = self.stage_slots - ops.where(self.pp > 1, self.pp_embedding_slot, 0.0)
        return ops.where(self.pipeline_explicit > 0, self.pipeline_first_layers, slotted)

    @cached_property
    def moe_layers_per_stage(self):
        """MoE layers on the fullest stage: n_moe / pp on an even split, otherwise the model's MoE
        share of that stage's layers."""
        even = self.layers_per_stage * self.pp == self.n_layers
        share = self.layers_per_stage * self.n_moe_layers / ops.maximum(self.n_layers, 1.0)
        return ops.where(even, self.n_moe_layers / self.pp, share)

    @cached_property
    def end_stage_layers(self):
        """Transformer layers beside the output head on the last stage: one fewer than the fullest
        stage where the loss takes a slot (only that stage's chunk holding it loses the layer)."""
        slotted = self.stage_slots - ops.where(self.pp > 1, self.pp_loss_slot, 0.0)
        return ops.where(self.pipeline_explicit > 0, self.pipeline_last_layers, slotted)

    @property
    def params_head(self):
        """Output-head parameters held apart from the embedding: none when tied on one stage."""
        return ops.where((self.tied_embeddings > 0) & (self.pp == 1), 0.0, self.vocab * self.hidden)

    @property
    def offloaded_layer_share(self):
        """Share of a stage's layers whose saved activations go to the host: 0 without activation
        offload, else activation_offload_layers over the stage's layers (all of them when unset)."""
        share = ops.minimum(self.activation_offload_layers / ops.maximum(self.layers_per_stage, 1.0), 1.0)
        return ops.where(self.activation_offload > 0, share, 0.0)

    @property
    def optimizer_offloaded(self):
        """Optimizer states (and their step) live on the host: offload optimizer or all."""
        return (self.offload == 1) | (self.offload == 3)

    @property
    def parameters_offloaded(self):
        """Weight shards live on the host: offload parameters or all."""
        return self.offload >= 2

    @property
    def adapted_first_mlp(self):
        """Adapted parts of the MLP's input projection: gate and up for SwiGLU; a plain MLP has one
        input linear, which `gate` and `up` both name."""
        either = ops.maximum(self.lora_gate, self.lora_up)
        return ops.where(self.mlp_matrices == 3, self.lora_gate + self.lora_up, either)

    @property
    def qkv_linears(self):
        """Linears projecting q, k and v: 1 fused, 3 apart; MLA's down and up projections (4, or 3
        with queries projected in one linear)."""
        return ops.where(self.mla > 0, 3.0 + (self.q_lora_rank > 0), 3 - 2 * self.fused_qkv)

    @property
    def mlp_input_linears(self):
        """Linears of the MLP's input side: 2 for gate and up apart, 1 fused or for a plain MLP."""
        return ops.where(self.mlp_matrices == 3, 2 - self.fused_gate_up, 1.0)

    @cached_property
    def linears_per_layer(self):
        """Linear modules of a dense layer: the q/k/v ones, the output projection, the MLP's input
        ones and its down projection (4 when q/k/v and gate/up are fused, 7 for Hugging Face Llama);
        in a hybrid the average over its blocks (a Mamba-2 mixer's in_proj and out_proj)."""
        linears = self.qkv_linears + 1 + self.mlp_input_linears + 1
        if not ops.any(self.hybrid > 0):
            return linears
        hybrid = (self.attention_share * (self.qkv_linears + 1) + self.mlp_share * (self.mlp_input_linears + 1)
                  + self.mamba_share * 2)
        return ops.where(self.hybrid > 0, hybrid, linears)

    @property
    def adapted_qkv_linears(self):
        """Adapters on the q/k/v side: one per targeted linear, so a fused q/k/v linear carries one
        however many of its parts are targeted (PEFT on Qwen-1's `c_attn`, LitGPT's LoRAQKVLinear)."""
        parts = self.lora_q + self.lora_k + self.lora_v
        adapted = ops.where(self.fused_qkv > 0, ops.minimum(parts, 1.0), parts)
        if not ops.any(self.mla > 0):
            return adapted
        latent = self.lora_q * (1.0 + (self.q_lora_rank > 0)) + 2 * ops.maximum(self.lora_k, self.lora_v)
        return ops.where(self.mla > 0, latent, adapted)

    def mla_adapted_widths(self, tp=1.0):
        """(fan-in, fan-out) summed over the MLA query and key/value linears that carry adapters
        (lora q: its query linears; k or v: the key/value down and up projections), the up
        projections' outputs split over `tp`."""
        has_q_latent = self.q_lora_rank > 0
        q_width = self.n_heads * self.head_dim / tp
        kv_up = self.mla_kv_up_width / tp
        key_value = ops.maximum(self.lora_k, self.lora_v)
        fan_in = (self.lora_q * (self.hidden + ops.where(has_q_latent, self.q_lora_rank, 0.0))
                  + key_value * (self.hidden + self.kv_lora_rank))
        fan_out = (self.lora_q * (q_width + ops.where(has_q_latent, self.q_lora_rank, 0.0))
                   + key_value * (self.kv_lora_rank + self.rope_head_dim + kv_up))
        return fan_in, fan_out

    @property
    def adapted_mlp_input_linears(self):
        """Adapters on the MLP's input side: one per targeted linear (one on a fused gate/up)."""
        either = ops.maximum(self.lora_gate, self.lora_up)
        return ops.where(self.fused_gate_up > 0, either, self.adapted_first_mlp)

    @cached_property
    def adapted_linears(self):
        """Adapter modules per layer of a LoRA/QLoRA row (0 for full training)."""
        if not ops.any(self.method > 0):  # no row adapts anything
            return 0.0
        count = self.adapted_qkv_linears + self.lora_o + self.adapted_mlp_input_linears + self.lora_down
        if ops.any(self.hybrid > 0):  # in a hybrid's attention and MLP layers only
            count = ops.where(self.hybrid > 0, self.attention_share * (self.adapted_qkv_linears + self.lora_o)
                              + self.mlp_share * (self.adapted_mlp_input_linears + self.lora_down), count)
        return ops.where(self.method > 0, count, 0.0)

    @property
    def attended_keys(self):
        """Keys a query attends to in the FLOP convention, averaged over the layers (attended_keys)."""
        return attended_keys(self)

    @property
    def micro_batch_tokens(self):
        """Tokens of one micro-batch on one GPU: micro_batch · seq_len, split over the CP group."""
        return self.micro_batch * self.seq_len / self.cp

    @property
    def local_experts(self):
        """Routed experts on one expert-parallel rank (n_experts / ep), at least one."""
        return ops.maximum(self.n_experts / self.ep, 1.0)

    @property
    def q_width_local(self):
        """Query width on one TP rank: its heads × head_dim."""
        return self.n_heads * self.head_dim / self.tp

    @property
    def kv_width_local(self):
        """Key width on one TP rank: its KV heads × head_dim, at least one head (a KV head is
        replicated when TP exceeds the KV heads, as Megatron does). MLA: every head's key."""
        return self.head_dim * ops.maximum(self.kv_heads / self.tp, 1.0)

    @property
    def v_width_local(self):
        """Value width on one TP rank: its KV heads × v_head_dim (at least one head, as keys)."""
        return self.v_head_dim * ops.maximum(self.kv_heads / self.tp, 1.0)

    @property
    def attention_out_local(self):
        """Attention output width on one TP rank, the output projection's input: heads × v_head_dim."""
        return self.n_heads * self.v_head_dim / self.tp

    @property
    def etp(self):
        """Tensor-parallel degree of the routed experts: `expert_tp`, else tp (a planner's or a
        sweep's tp carries over)."""
        return ops.where(self.expert_tp > 0, self.expert_tp, self.tp)

    @property
    def mla_kv_up_width(self):
        """Output width of MLA's key/value up projection, all heads (mla_kv_up_width)."""
        return mla_kv_up_width(self)

    @property
    def mla_latent_width(self):
        """MLA's down-projection outputs per token: the query latent, the key/value latent and the
        shared rotary key (0 without MLA)."""
        return self.mla * (self.q_lora_rank + self.kv_lora_rank + self.rope_head_dim)

    @property
    def mla_down_tokens_share(self):
        """Share of a micro-batch's tokens MLA's replicated down projections run on per TP rank: its
        sequence shard under sequence parallelism (Megatron-Core runs them before gathering the
        latents), else every token on every rank."""
        return ops.where(self.sequence_parallel_active > 0, 1 / self.tp, 1.0)

    @property
    def sequence_parallel_active(self):
        """Sequence parallelism only changes anything with tensor parallelism."""
        return self.sequence_parallel * (self.tp > 1)

    @property
    def sequence_shards(self):
        """Ranks a tensor outside the TP region (norm inputs and outputs, residuals) is split over:
        tp under sequence parallelism, else 1 (replicated on every TP rank)."""
        return ops.where(self.sequence_parallel_active > 0, self.tp, 1.0)

    @cached_property
    def recompute_modules_listed(self) -> bool:
        """Whether any row redoes a Megatron-Core recompute module beside the attention core (else
        every term of module_recompute.py is 0 and is skipped)."""
        return any(bool(ops.any(getattr(self, f"redo_{name}") > 0)) for name in RECOMPUTE_MODULES[1:])

    @cached_property
    def op_level_redone_linears(self):
        """(k, o, up): 1 for each linear torchtitan's op-level selective recompute redoes, 0 for one it
        keeps (the policy and its layout rules: core._op_level_recomputed_gemms). k and the up
        projection are redone where each is a linear of its own (fused, they are the kept first
        matmul); o unless sequence parallelism keeps its reduce-scattered output; up in gated MLPs."""
        k = 1.0 - self.fused_qkv
        o = ops.where(self.sequence_parallel_active > 0, 0.0, 1.0)
        up = ops.where((self.mlp_matrices == 3) & (self.fused_gate_up == 0), 1.0, 0.0)
        return k, o, up

    @property
    def checkpoint_bytes(self):
        """One full checkpoint: 16-bit weights, plus the optimizer states when every weight trains."""
        return self.params_total * (self.weight_bytes + ops.where(self.method == 0, self.optimizer_bytes, 0.0))


def mla_kv_up_width(x):
    """Output width of MLA's key/value up projection, all heads: every head's non-rotary key and
    its value (TP splits it by heads). Any object with the fields (a monitor's namespace too)."""
    return x.n_heads * (x.head_dim - x.rope_head_dim + x.v_head_dim)


def attended_keys(x):
    """Keys a query attends to in the FLOP convention, averaged over the layers: the whole sequence,
    or the window in the windowed layers. Any object with the fields (a monitor's namespace too)."""
    windowed = ops.minimum(x.seq_len, x.context_len_cap)
    return x.windowed_share * windowed + (1 - x.windowed_share) * x.seq_len


_FIELD_NAMES = frozenset(f.name for f in fields(Inputs))
# derived layout figures computed once per Inputs (they are read many times per evaluation)
_CACHED = tuple(name for name, value in vars(Inputs).items() if isinstance(value, cached_property))


def stack_inputs(rows: list[Inputs]) -> Inputs:
    """Many single-configuration Inputs as one of arrays (rows must share nothing but the type)."""
    return Inputs(**{f.name: np.array([getattr(r, f.name) for r in rows], dtype=float) for f in fields(Inputs)})


def inputs_from_job(job: Job, params: ModelParameters, python_floats: bool = False) -> Inputs:
    """Flatten one job; the profile's measurements replace datasheet ceilings where present.

    The numbers are np.float64, which divide by zero as an array would (inf or NaN in a branch
    `where` discards). `python_floats`: Python floats instead, three times cheaper to compute with
    but raising ZeroDivisionError there; for a caller that evaluates again on np.float64 when one
    does (estimator.estimate, ops.py)."""
    fields = {**job_fields.model_fields(job.model), **job_fields.training_fields(job),
              **job_fields.gpu_fields(job, params), **job_fields.link_fields(job),
              **job_fields.host_fields(job, params)}
    numbers = np.array(list(fields.values()), dtype=float)
    return Inputs.from_numbers(dict(zip(fields, numbers.tolist() if python_floats else numbers, strict=True)))
