"""What a training stack does that changes memory and speed: facts with sources, one entry per stack."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from trainrig.specs.base import CatalogEntry

__all__ = ["FrameworkSpec", "CUSTOM_FRAMEWORK"]

HostOps = Annotated[float, Field(ge=0)]  # host time in eager ops: never negative, as zero3_gather_host_ops


class FrameworkSpec(CatalogEntry):
    """A training framework as the estimate needs it (catalog `frameworks`)."""

    fused_kernels: bool | None = None
    """Whether the stack fuses norms, activations and rotary embeddings when the job does not say:
    false = eager PyTorch modules (HF Trainer without torch_compile, torchtune whose configs default
    to `compile: False`, LitGPT 2023); true = its own fused kernels (Megatron, Unsloth); null = no default."""
    low_precision_saves_quantized_inputs: bool = False
    """In fp8/fp4 training its linears keep their inputs for the weight gradient in the quantized
    format, 1 byte per element in fp8 (Transformer Engine's Linear, LayerNormLinear and GroupedLinear
    save the quantized input: Megatron-Core, NeMo); false = the 16-bit input is kept and cast again
    in the backward (torchao's Float8Linear)."""
    default_zero: int = Field(default=0, ge=0, le=3)
    """The ZeRO stage the stack's recipes run when the job does not say: 1 for NeMo / Megatron-Bridge,
    whose recipes turn Megatron-Core's distributed optimizer on; 0 where it is opt-in."""
    default_cp_kind: Literal["ring", "all-gather", "ulysses"] | None = None
    """How the stack's context parallelism moves keys and values when the job does not say
    (`training.cp_kind`): `all-gather` for torchtitan, whose `context_parallel_rotate_method`
    defaults to allgather; null = the job's default, ring."""
    default_loss: Literal["full", "chunked", "fused", "fused_linear"] | None = None
    """The cross-entropy the stack's recipes run when the job does not say (`training.loss`): `fused`
    for NeMo / Megatron-Bridge, whose pretraining recipes set `cross_entropy_fusion_impl = "te"`
    (Transformer Engine's in-place kernel); `chunked` for LitGPT, whose fine-tuning scripts call
    `chunked_cross_entropy` on the head's chunked output; `fused_linear` for Unsloth; null = the
    job's default, `full`."""
    default_master_weights: bool | None = None
    """Whether the stack's recipes keep an fp32 master copy of the weights when the job does not say
    (`training.master_weights`): false for NeMo AutoModel, which loads the model in bf16, keeps that
    dtype in FSDP2 (MixedPrecisionPolicy param_dtype bf16) and runs torch's Adam, whose moments
    follow the parameters' dtype; null = the job's default, true."""
    default_optimizer: Literal["adamw", "adam8bit", "paged_adamw", "paged_adamw8bit", "sgd", "adafactor"] | None = None
    """The optimizer the stack's own recipes and notebooks run when the job does not say
    (`training.optimizer`): `adam8bit` for Unsloth, whose notebooks and README benchmarks set
    `optim = "adamw_8bit"` (bitsandbytes 8-bit AdamW); null = the job's default, adamw."""
    vocab_padding_multiple: int | None = Field(default=None, ge=1, le=65536)
    """The multiple the stack rounds the output layer's vocabulary up to on every tensor-parallel
    rank when the job does not say (`training.vocab_padding_multiple`): 128 for Megatron-Core and
    NeMo (`make_vocab_size_divisible_by`, default 128, times tp: megatron/training/tokenizer
    `_vocab_size_with_padding`), 512 for LitGPT (Config.padding_multiple), 1 where the model code
    takes the checkpoint's vocabulary as it is (Hugging Face, torchtune, torchtitan); null = unknown."""
    default_recompute: Literal["none", "selective", "full"] | None = None
    """The activation checkpointing the stack applies when the job states neither `recompute` nor
    `activation_offload`, with `default_activation_offload`: Unsloth's `get_peft_model` defaults to
    `use_gradient_checkpointing="unsloth"`, which recomputes each layer and keeps its input in host
    RAM (full recompute with the checkpoints offloaded); null = the job's default, none."""
    default_activation_offload: bool = False
    """With `default_recompute`: the saved activations go to host memory too (see there)."""
    pipeline_end_slots_when_uneven: bool = False
    """Megatron-Core refuses a layer count that pp·vpp does not divide (TransformerConfig.__post_init__)
    unless the first and last stages are sized or the embedding and loss take layer-slots; where the
    layers plus both ends divide evenly and the job sets neither, the stack's recipes count the ends
    (`account_for_embedding_in_pipeline_split` and `account_for_loss_in_pipeline_split`:
    Megatron-Bridge's Llama 3.1 405B, 126 + 2 = 128 slots on pp 8 × vpp 8 or pp 16 × vpp 4,
    recipes/llama/h100/llama3.py `llama31_405b_pretrain_256gpu_h100_bf16_config`)."""
    persistent_grad_buffer: bool = False
    """Gradients live in a buffer allocated once and kept between steps (Megatron's contiguous
    main_grad buffer, DeepSpeed's gradient partitions), so they are alive during the forward too;
    false = PyTorch's `zero_grad(set_to_none=True)` frees them after every step."""
    fsdp_unsharded_accumulation: bool = False
    """Under FSDP, micro-batches before the last of a step run inside `no_sync()`, which keeps the
    full unsharded gradients on every rank (PyTorch FSDP docs, `no_sync`)."""
    fsdp_frozen_params_get_grads: bool = False
    """FSDP wraps frozen base weights and trainable adapters into one flat parameter
    (`use_orig_params=True`), so gradient memory is that of training every weight (PyTorch FSDP docs,
    "FSDP has some constraints on freezing parameters")."""
    fused_qkv: bool | None = None
    """Its own model code projects q, k and v with one linear (Megatron-Core `linear_qkv`, LitGPT
    `attn`), or with three (torchtitan `wq`/`wk`/`wv`, torchtune and Hugging Face `q_proj`/`k_proj`/
    `v_proj`); null = it runs whatever model code it is given (then one, unless `model.fused_qkv`
    says). A model that sets `fused_qkv` (its Hugging Face code fuses: Qwen-1 `c_attn`) overrides it."""
    fused_gate_up: bool | None = None
    """Its own model code computes a gated MLP's gate and up projections as one linear (Megatron-Core
    `linear_fc1`) or two (torchtitan `w1`/`w3`, torchtune `w1`/`w3`, LitGPT `fc_1`/`fc_2`, Hugging Face
    `gate_proj`/`up_proj`); null = as `fused_qkv`."""
    fused_qkv_view_saved: bool = False
    """Attention reads q, k and v as views of one fused QKV output; the saved v keeps the whole QKV
    output alive for backward."""
    eager_norm_upcast: bool = False
    """Eager (uncompiled) RMSNorm upcasts its input to fp32 and saves that copy for backward
    (Hugging Face and torchtune RMSNorm); false = the norm runs in the training precision."""
    fsdp_unsharded_under_pp: bool = False
    """Under pipeline parallelism FSDP keeps each stage's weights gathered and its gradients
    unsharded for the whole step, reducing them once after the last micro-batch's backward:
    torchtitan's default `reshard_after_forward = not pp_enabled` (parallelize_llama.py apply_fsdp)
    and torch.distributed.pipelining's `backward_maybe_with_nosync` (stage.py:
    `set_reshard_after_backward(False)`, `set_requires_gradient_sync(False)` until the last backward,
    then the post-backward reduce-scatter). FSDP2 accumulates those gradients in its fp32 reduce dtype."""
    zero3_16bit_shard_copy: bool = False
    """Under ZeRO-3 with mixed precision the stack keeps a 16-bit shard of every parameter beside the
    fp32 master shard (DeepSpeed stage3.py: fp16_partitioned_groups_flat and
    fp32_partitioned_groups_flat); false = PyTorch FSDP, whose sharded parameter is the fp32 master
    itself and which casts to 16 bits only in the all-gather (FSDP2 MixedPrecisionPolicy
    param_dtype, FSDP1 MixedPrecision): 4 + 8 bytes of weights and Adam moments per parameter and
    shard instead of 2 + 12."""
    loss_parallel_bytes_per_logit: float | None = Field(default=None, gt=0, le=64)
    """Under tensor parallelism the full cross-entropy runs on vocabulary-sharded logits through
    DTensor's loss_parallel (torch/distributed/tensor/parallel/loss.py; torchtitan enables it with
    TP unless `disable_loss_parallel`): its fused nll + log-softmax backward,
    `(zeros_like(x) + exp(x)) * grad_output`, holds the fp32 log-softmax, the zeroed gradient, the
    exponential and their sum at once: 16 bytes per local logit at the start of the backward.
    Null = the stack's loss is PyTorch's own (`logits_bytes_per_element`)."""
    loss_bytes_per_logit: float | None = Field(default=None, gt=0, le=64)
    """The stack's own full cross-entropy, at any tensor parallelism, in bytes per local logit at its
    peak. Megatron-Core's vocab-parallel loss (tensor_parallel/cross_entropy.py, and the native fused
    one Megatron-Bridge turns on with cross_entropy_loss_fusion, fusions/fused_cross_entropy.py) upcasts
    the 16-bit logits into one fp32 buffer that it exponentiates and normalizes in place and saves as
    the softmax (4 bytes, beside the 16-bit logits during the forward); the backward turns it into the
    gradient in place and returns it in 16 bits (2): 6. Null = PyTorch's (`logits_bytes_per_element`).
    `loss: fused` (Transformer Engine's parallel_cross_entropy) overrides it."""
    zero3_module_fetch_us: float = Field(default=0.0, ge=0)
    """Host time per module and pass that ZeRO-3 spends gathering and releasing the module's
    parameters beyond the collective itself (hooks, bookkeeping, prefetch), in µs."""
    zero3_gather_host_ops: float = Field(default=0.0, ge=0)
    """Host ops ZeRO-3 issues per gathered parameter and gather beyond what the same fetch costs on
    one rank, each at `eager_op_host_us`; only when the parameters are sharded over more than one
    rank (on one rank nothing is gathered). DeepSpeed v0.11 (partition_parameters.py
    `all_gather_coalesced`, single parameter): `torch.empty` of the full buffer, the
    `all_gather_into_tensor` launch, `narrow` and one more `.to` beside the `.to`/`.view` both paths
    share (one rank: `_no_gather_coalesced`, `NoGatherHandle`): 4. Parameters under
    `stage3_param_persistence_threshold` (norms, biases) stay gathered and are not counted."""
    zero3_grad_full_passes: float = Field(default=0.0, ge=0, le=8)
    """HBM passes of gradient size (16-bit, every trainable element) that ZeRO-3's gradient path makes
    per micro-batch beyond the reduce-scatter itself. DeepSpeed v0.11.1 comm/coalesced_collectives.py
    `reduce_scatter_coalesced`: `tensor_partition_flat_buffer.div_(world_sz)` reads and writes the
    whole bucket before the collective, on one rank too: 2. 0 = none (PyTorch FSDP divides inside
    the collective's reduce op)."""
    zero3_grad_shard_passes: float = Field(default=0.0, ge=0, le=8)
    """HBM passes of this rank's gradient shard per micro-batch after the reduce-scatter: DeepSpeed
    v0.11.1 stage3.py `partition_grads` accumulates each reduced partition into the 16-bit gradient
    partition, `grad_buffer.add_(grad_partition...)` (two reads, one write: 3), `copy_` on the first
    micro-batch of a step (a read and a write: 2): on average 3 − 1/m over m micro-batches."""
    zero3_step_extra_bytes: float = Field(default=0.0, ge=0, le=256)
    """HBM bytes per local trainable parameter that ZeRO-3's optimizer step streams beyond the fused
    Adam update and the 16-bit copy (`OPTIMIZER_STEP_BYTES`), on the GPU step only. DeepSpeed
    v0.11.1 stage3.py `step` with 16-bit gradient partitions: `has_overflow` isinf and isnan of
    the partitions with `.any()` (2 × (2 + 1 + 1) = 8), `get_grad_norm_direct`'s
    `g.double().norm(2)` (2 + 8 + 8 = 18), `_prepare_fp32_grad_for_sub_group`'s `flatten` and
    `.to(float32)` (4 + 6 = 10), `unscale_and_clip_grads`' `mul_` of the fp32 gradient (8): 44."""
    dp_bucket_elements: float = Field(default=0.0, ge=0)
    """Gradients per data-parallel reduction bucket under ZeRO-0/1/2 (elements): DeepSpeed's
    `reduce_bucket_size`, 5e8 by default. The bucket still filling when the backward ends is reduced
    after it, in full; 0 = PyTorch DDP's buckets of the model's `dp_bucket_mb`."""
    dp_bucket_elements_per_rank: float = Field(default=0.0, ge=0)
    """Bucket elements per rank of the data-parallel group (dp · cp), when the bucket grows with
    the group: a bucket is then max(dp_bucket_elements, this × dp · cp). Megatron-Core's
    DistributedDataParallelConfig.bucket_size default, max(40000000, 1000000 · dp_size), "larger
    DP sizes need larger buckets to ensure collectives do not become latency-bound"
    (megatron/core/distributed/distributed_data_parallel_config.py). 0: a fixed bucket."""
    dp_param_gather_overlap: bool = False
    """The distributed optimizer's all-gather of the updated 16-bit weights (ZeRO-1/2) runs bucket by
    bucket beside the next step's first forward, each bucket's gather waited for before its first
    use and the next one started then (Megatron-Core `overlap_param_gather`, its forward pre-hooks);
    only the first bucket's gather and what outlasts that forward show. False: the gather runs
    after the optimizer step, exposed."""
    selective_recompute: Literal["ops", "attention"] = "ops"
    """What `recompute: selective` does where flash attention leaves no attention scores to drop.
    `ops`: torchtitan's op-level policy (parallelize_llama.py `_custom_policy`, `selective_ac_option:
    op`): each block keeps the outputs of every odd matmul (q, v, w1, w2), the attention kernel's and
    TP's reduce-scatters', and redoes the rest in the backward (k, o, w3 and the elementwise ops).
    `attention`: Megatron-Core's selective granularity (`recompute_modules: [core_attn]`), which
    checkpoints only the core attention module (attention.py `_checkpointed_attention_forward`): the
    fused kernel's forward runs again in the backward and its log-sum-exp is not kept; everything
    else is kept as without recompute."""
    checkpoint_early_stop: bool = False
    """Full recompute stops once the backward's saved tensors are rebuilt: PyTorch's non-reentrant
    `torch.utils.checkpoint` (and `checkpoint_wrapper` with NO_REENTRANT) stops recomputation early by
    default (`set_checkpoint_early_stop`), so a block's last matmul, the MLP's down projection whose
    output nothing in the backward reads, is not redone. false = reentrant checkpoints (Megatron's
    `tensor_parallel.checkpoint`, Hugging Face's default `use_reentrant=True`) rerun the whole forward."""
    swiglu_saves_activation: bool = False
    """With fused kernels too, the gated MLP saves silu(gate) beside gate and up (torch.compile's
    default partitioning, as torchtune's compiled Llama 3.2 3B rows measure); false = a fused SwiGLU
    that recomputes it (Megatron's bias_swiglu, Liger, Transformer Engine)."""
    quantized_linear_saves_input: bool = True
    """A quantized frozen linear keeps its input for backward (bitsandbytes' MatMul4Bit stores
    `ctx.tensors = (A, B)` whenever the input needs a gradient); false = only the weight (torchao's
    NF4 linear)."""
    lora_dropout: float = Field(default=0.05, ge=0, lt=1)
    """Dropout on the LoRA branch by default (`training.lora_dropout` overrides it)."""
    lora_dropout_position: Literal["input", "output"] = "input"
    """Where the LoRA branch applies its dropout. `input`: on the adapter's input, before A (PEFT's
    `lora_dropout(x)`, torchtune's LoRALinear), so every adapted input is copied, with a 1-byte
    mask, for A's backward. `output`: on B's output, before it is added to the base output (NeMo
    AutoModel's PeftConfig `dropout_position: post`, its default), which keeps only the 1-byte
    mask, as wide as the linear's output."""
    lora_adapter_host_ops: tuple[HostOps, HostOps] | None = None
    """Host time of one LoRA adapter per micro-batch as (forward, backward) in `eager_op_host_us`
    units, measured for the stack's adapter code (`benchmarks/lora_adapter_host_ops.py`); null = its
    small ops counted one each: A, B and the scaled add (+ dropout) forward, twice that backward."""
    moe_router_host_ops: tuple[HostOps, HostOps] = (0.0, 0.0)
    """Small ops an MoE layer's router issues per micro-batch beside its GEMM and top-k kernels:
    (forward, backward), each `eager_op_host_us` of host time: the score function, the scatter of
    the top-k probabilities, the load-balancing loss. A `moe_router` or `moe` CUDA graph captures
    them. 0 = none counted (the stack's MoE code is not read)."""
    moe_layer_host_ops: tuple[HostOps, HostOps] = (0.0, 0.0)
    """Small ops the rest of an MoE layer issues per micro-batch beyond its MoE kernels (permutes,
    all-to-alls, grouped GEMMs): (forward, backward): the dispatcher's token counts, their
    all-gather and copies to the host, the chunk sorts. A `moe` CUDA graph captures them."""
    moe_expert_host_ops: tuple[HostOps, HostOps] = (0.0, 0.0)
    """Small ops per local expert and MoE layer: (forward, backward). Transformer Engine's
    GroupedLinear launches one cuBLASLt GEMM per expert (2 linears: forward 2, backward dgrad and
    wgrad 4), and under fp8 quantizes each expert's slice apart (job_fields.GROUPED_QUANTIZE_OPS)."""
    tensor_parallel: bool = True
    """Supports tensor (and sequence) parallelism."""
    pipeline_parallel: bool = True
    """Supports pipeline parallelism."""
    tp_comm_overlap: bool = True
    """Can overlap tensor-parallel collectives with GEMMs (`training.tp_comm_overlap`): Megatron-Core
    and NeMo through Transformer Engine userbuffers, torchtitan through async TP."""
    tp_overlap_micro_pipeline: bool = False
    """The TP overlap is PyTorch's micro-pipeline ("async") TP, not Transformer Engine's userbuffers:
    torch inductor's micro_pipeline_tp pass fuses an all-gather into the matmuls that consume it and a
    reduce-scatter into the one matmul whose output it scatters (fused_all_gather_matmul,
    fused_matmul_reduce_scatter), and nothing else; it has no bulk overlap beside another GEMM. An
    input gradient summed over separate q/k/v (or gate/up) linears is not one matmul's output, so its
    reduce-scatter runs as a plain, exposed collective; a fused linear's is pipelined beside that
    linear's own input-gradient GEMM."""
    pp_p2p_overlap: bool = False
    """Its interleaved pipeline schedule (vpp > 1) posts each chunk's activation send and receive
    asynchronously and waits only before the chunk that needs them, so in the steady state a send runs
    beside the next chunk's forward or backward (Megatron-Core `overlap_p2p_comm`, on unless
    `--no-overlap-p2p-communication`, which "only affects the interleaved schedule"); the pipeline's
    fill and drain still wait on theirs. False: every send is on the critical path."""
    tp_dtensor: bool = False
    """Its tensor parallelism runs through torch's DTensors (`parallelize_module` with
    ColwiseParallel / RowwiseParallel styles: torchtitan, AutoModel, torchtune). Uncompiled, each op
    on a sharded weight goes through DTensor's Python dispatch (sharding propagation, wrapping, the
    redistribute calls), host time counted per sharded linear and adapter and, with sequence
    parallelism, per layer (ModelParameters `dtensor_linear_host_us`, `dtensor_adapter_host_us`,
    `dtensor_sequence_parallel_host_us`); torch.compile traces it away."""
    quantized_lora: bool = True
    """Supports LoRA over a quantized base (QLoRA)."""
    qlora_unquantized_fp32: bool = False
    """QLoRA runs through PEFT's `prepare_model_for_kbit_training`, which casts every 16-bit parameter
    that is not a quantized weight (embedding, output head, norms) to fp32 (peft/utils/other.py: "cast
    all non INT8 parameters to fp32"), so the base keeps them at 4 bytes each. Only over a bitsandbytes
    base (NF4, int8): PEFT skips the cast for GPTQ ones (`peft_casts_unquantized_to_fp32`)."""


CUSTOM_FRAMEWORK = FrameworkSpec(
    id="custom", name="custom training loop", sources=("no framework-specific facts",),
    lora_dropout=0.0,
)
"""No framework facts: the defaults above, which keep the results of jobs that name no framework."""
