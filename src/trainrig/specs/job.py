"""What a training job is: the model, the hardware it runs on and how it is trained."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BeforeValidator, Field, model_validator

from trainrig.errors import TrainrigError
from trainrig.specs.base import (
    MAX_BATCH,
    MAX_FIGURE,
    MAX_GPUS,
    MAX_LAYERS,
    MAX_SEQ_LEN,
    MAX_TOKENS,
    MAX_WIDTH,
    FrozenSpec,
    divisors_text,
)
from trainrig.specs.framework import CUSTOM_FRAMEWORK, FrameworkSpec
from trainrig.specs.gpu import GPU
from trainrig.specs.hardware import CPU, HostMemory, Link, Storage
from trainrig.specs.model import ModelSpec
from trainrig.specs.profile import HardwareProfile

__all__ = ["TrainingSpec", "NetworkSpec", "HardwareSpec", "Job", "TrainPrecision", "Framework", "LORA_MODULES",
           "resolve_attention_kernel", "resolve_fp8_recipe", "expert_tp_degree", "RECOMPUTE_MODULES"]

TrainPrecision = Literal["fp32", "fp16", "bf16", "fp8", "fp4"]
Framework = Literal["custom", "megatron", "nemo", "torchtitan", "deepspeed", "hf-trainer", "torchtune",
                    "litgpt", "unsloth", "axolotl", "automodel"]
LORA_MODULES = ("q", "k", "v", "o", "gate", "up", "down")
# Megatron-Core's names for the submodules selective recompute can redo (TransformerConfig.recompute_modules)
# What Megatron-Core's CUDA graphs capture (cuda_graph_scope / cuda_graph_modules)
CudaGraphScope = Literal["layer", "attn", "mlp", "moe", "moe_router", "moe_preprocess", "full_iteration"]
RecomputeModule = Literal["core_attn", "mla_up_proj", "layernorm", "moe_act", "mlp", "moe", "shared_experts"]
RECOMPUTE_MODULES = get_args(RecomputeModule)
# Module names the common stacks use for the same linears (Hugging Face/PEFT, torchtune, LitGPT).
LORA_MODULE_ALIASES = {
    "q_proj": "q", "query": "q", "k_proj": "k", "key": "k", "v_proj": "v", "value": "v",
    "o_proj": "o", "output_proj": "o", "proj": "o", "projection": "o", "out_proj": "o", "dense": "o",
    "gate_proj": "gate", "w1": "gate", "fc_1": "gate", "up_proj": "up", "w3": "up", "fc_2": "up",
    "down_proj": "down", "w2": "down", "mlp": "mlp",
}
LORA_TARGET_SETS = {"all-linear": LORA_MODULES, "attention": ("q", "k", "v", "o"), "mlp": ("gate", "up", "down")}


def _lora_targets(value: object) -> str | tuple[str, ...]:
    """`all-linear`, `attention`, or a list of module names normalized to q, k, v, o, gate, up, down."""
    if isinstance(value, str) and value in LORA_TARGET_SETS:
        return value
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not names:
        raise ValueError("must be all-linear, attention or a list of q, k, v, o, gate, up, down")
    out: list[str] = []
    for raw in names:
        name = LORA_MODULE_ALIASES.get(str(raw).lower(), str(raw).lower())
        if name == "mlp":
            out.extend(LORA_TARGET_SETS["mlp"])
        elif name in LORA_MODULES:
            out.append(name)
        else:
            raise ValueError(f"'{raw}' is not a linear module; use q, k, v, o, gate, up, down")
    return tuple(sorted(set(out), key=LORA_MODULES.index))


LoraTargets = Annotated[str | tuple[str, ...], BeforeValidator(_lora_targets)]


class TrainingSpec(FrozenSpec):
    """How the model is trained: batch, precision, parallelism, memory savers, optimizer."""

    seq_len: int = Field(default=4096, gt=0, le=MAX_SEQ_LEN)
    """Tokens per sequence (at most a billion)."""
    global_batch: int = Field(default=256, gt=0, le=MAX_BATCH)
    """Sequences per optimizer step, over all data-parallel ranks."""
    micro_batch: int = Field(default=1, gt=0, le=MAX_BATCH)
    """Sequences per forward/backward pass on one GPU."""
    precision: TrainPrecision = "bf16"
    """Compute precision of the GEMMs; fp16/bf16/fp8/fp4 imply mixed precision with fp32 master weights.
    fp4 is NVFP4 (Transformer Engine's NVFP4BlockScaling, Megatron-Bridge `nvfp4`; Blackwell only):
    the linear layers' three GEMMs on E2M1 values with an E4M3 scale per 16 and an fp32 scale per
    tensor; attention and the output head in bf16, as under fp8."""
    tp: int = Field(default=1, gt=0, le=MAX_GPUS)
    """Tensor-parallel degree (every degree at most ten million, the most GPUs a job may have)."""
    pp: int = Field(default=1, gt=0, le=MAX_GPUS)
    """Pipeline-parallel stages; pp·vpp may be any count up to the layers: an uneven split is paced
    by its fullest stage, ceil(layers / (pp·vpp)) layers per chunk."""
    cp: int = Field(default=1, gt=0, le=MAX_GPUS)
    """Context-parallel degree (the sequence split across GPUs)."""
    ep: int = Field(default=1, gt=0, le=MAX_GPUS)
    """Expert-parallel degree (MoE only), carved out of dp × cp, or of tp × dp × cp with an
    `expert_tp` below tp."""
    expert_tp: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    """Tensor-parallel degree of the routed experts (Megatron-Core `expert_tensor_parallel_size`);
    unset = tp. Below tp, the experts' ranks fold the tensor-parallel ones into expert parallelism
    (MoE parallel folding, Liu et al. 2024): ep · expert_tp must divide tp · dp · cp, and each
    rank runs whole-width experts (expert_tp 1) on its sequence-parallel share of the tokens."""
    dp: int | Literal["auto"] = "auto"
    """Data-parallel degree; `auto` = n_gpus / (tp · pp · cp)."""
    vpp: int = Field(default=1, gt=0, le=MAX_GPUS)
    """Interleaved pipeline chunks per stage (virtual pipeline size)."""
    dp_shard: int | None = Field(default=None, ge=1, le=MAX_GPUS)
    """Hybrid sharding (HSDP): the ZeRO/FSDP states are sharded over groups of dp_shard
    data-parallel ranks (× cp) and replicated over dp / dp_shard such groups, whose gradient shards
    are all-reduced after each reduce-scatter. PyTorch FSDP `HYBRID_SHARD` (a node per group), FSDP2's
    2-D mesh (torchtitan `data_parallel_shard_degree` × `data_parallel_replicate_degree`),
    Megatron-Core `num_distributed_optimizer_instances`. Must divide dp; unset = shard over all of dp."""
    pp_schedule: Literal["1f1b", "gpipe", "zb-h1"] = "1f1b"
    """Pipeline schedule (pp > 1). `1f1b`: one forward, one backward (Narayanan et al. 2021;
    interleaved with vpp > 1): a bubble of (pp − 1)/vpp micro-batches, at most pp micro-batches'
    activations in flight. `gpipe`: every forward before any backward (Huang et al. 2019): the same
    bubble, all micro-batches' activations in flight. `zb-h1`: zero-bubble's memory-efficient
    schedule (Qi et al. 2024, ICLR, §2.1; torchtitan's zero-bubble schedules, sail-sg's Megatron):
    the backward split into the input gradient (B) and the weight gradient (W), W filling the tail,
    so the bubble is (pp − 1)·(F + B − W) instead of (pp − 1)·(F + B + W), at 1F1B's memory."""
    pp_local_batch: int | None = Field(default=None, gt=0, le=MAX_BATCH)
    """Sequences one pipeline takes per run of its schedule, in micro-batches of `micro_batch`
    (torchtitan's and NeMo AutoModel's `local_batch_size`): trainers on torch.distributed.pipelining
    call the schedule's `step()` once per local batch, and each call fills and drains the pipeline,
    so a step of global_batch/dp sequences pays global_batch/(dp·pp_local_batch) bubbles, each with at
    most pp_local_batch/micro_batch micro-batches in flight. Unset = a step's micro-batches in one
    schedule, one bubble (Megatron-Core). Needs pp > 1."""
    pipeline_layers: tuple[int, ...] | None = None
    """Transformer layers on each pipeline stage, first to last (pp counts summing to the model's
    layers), for a split the frameworks' even rule does not give: Megatron-Core's
    `pipeline_model_parallel_layout`, torchtitan's per-stage module lists. The first stage also holds
    the embedding, the last the output head; with vpp > 1 each count is the stage's chunks together.
    Unset = the even split (with the `account_for_*` slots)."""
    decoder_first_pipeline_num_layers: int | None = Field(default=None, ge=0, le=MAX_LAYERS)
    """Megatron-Core's: the first stage's transformer layers, the others' split evenly over the
    remaining stages (with `decoder_last_pipeline_num_layers`, the middle ones); resolves into
    `pipeline_layers`."""
    decoder_last_pipeline_num_layers: int | None = Field(default=None, ge=0, le=MAX_LAYERS)
    """Megatron-Core's: the last stage's transformer layers (see decoder_first_pipeline_num_layers)."""
    account_for_embedding_in_pipeline_split: bool = False
    """The embedding counts as one layer-slot of the pipeline split, so the first stage holds one
    transformer layer fewer (Megatron-Core TransformerConfig field of the same name)."""
    account_for_loss_in_pipeline_split: bool = False
    """The output layer and loss count as one layer-slot of the pipeline split, so the last stage
    holds one transformer layer fewer (Megatron-Core TransformerConfig field of the same name); with
    both, 126 layers + 2 slots on pp 8 × vpp 8 put 2 slots in each of the 64 chunks."""
    grad_accum: int | None = Field(default=None, gt=0, le=MAX_BATCH)
    """Micro-batches per step per data-parallel rank; derived when absent."""
    zero: int | None = Field(default=None, ge=0, le=3)
    """ZeRO stage: 1 shards optimizer states (Megatron's distributed optimizer), 2 also gradients, 3
    also weights (FSDP full_shard); unset = the framework's default (NeMo / Megatron-Bridge recipes:
    1; otherwise 0)."""
    recompute: Literal["none", "selective", "full"] = "none"
    """Activation recomputation: full redoes whole layers; selective redoes the attention core
    (Korthikanti et al. 2022; Megatron and NeMo redo the fused attention kernel's forward), or, with
    flash attention under other frameworks, runs torchtitan's op-level policy (every other matmul's
    output kept, k, o and the up projection redone; frameworks catalog `selective_recompute`)."""
    recompute_num_layers: int | None = Field(default=None, ge=1)
    """With `recompute: full`, how many layers of each pipeline stage (of each model chunk with
    vpp > 1, as Megatron counts) are recomputed; the stage's other layers keep all their activations
    and are not redone. Megatron-Core and NeMo `recompute_method: block` with `recompute_num_layers`;
    torchtitan's `selective_ac_option: k` (every k-th block) is n_layers / k. Unset = every layer.
    Acts only under full recompute (a plan that tries other policies keeps it, inert there)."""
    recompute_modules: list[RecomputeModule] | None = None
    """With `recompute: selective`, the submodules each layer recomputes, as Megatron-Core's
    `recompute_modules` names them (TransformerConfig; `--recompute-modules`): `core_attn` the
    attention core; `mla_up_proj` MLA's up projections and rotary, whose q, k and v are not kept;
    `layernorm` the norms standing alone before a linear (Transformer Engine fuses the others into
    it: MLA's input norm and the norm before an MoE layer are alone), whose outputs are not kept;
    `moe_act` the experts' activation, whose output (the down projection's input) is not kept;
    `mlp` a dense layer's whole MLP; `moe` a whole MoE layer, dispatch included; `shared_experts`
    the shared experts. Given, it replaces the framework's selective policy; without `recompute`
    it means `selective`. Unset = the framework's own policy (Megatron-Core: `[core_attn]`). Acts
    only under selective recompute (a plan that tries other policies keeps it, inert there)."""
    mtp_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    """Multi-token prediction modules trained beside the model (DeepSeek-V3 §2.2; Megatron-Core
    `--mtp-num-layers`, DeepSeek-V3's recipes: 1). Each adds on the last pipeline stage one more
    transformer layer (as the model's last), a projection of the normalized hidden state and next
    token's embedding (2·hidden → hidden), and the output head and loss again; its parameters are
    not in the model's count. 0 = none."""
    sequence_parallel: bool = False
    """Megatron sequence parallelism: norms and dropout split over the TP group too."""
    tp_comm_overlap: bool = False
    """Tensor-parallel all-gathers and reduce-scatters run in chunks beside the GEMMs that consume or
    produce them, so only what outlasts a GEMM shows (Megatron-Core `--tp-comm-overlap` with
    Transformer Engine userbuffers, NeMo `tp_comm_overlap`, torchtitan async TP). Both need
    sequence parallelism; false = every TP collective on the critical path."""
    pp_comm_overlap: bool | None = None
    """The interleaved pipeline schedule (vpp > 1) sends each chunk's activations beside the next
    chunk's compute, only the fill and drain waiting on theirs (Megatron-Core `overlap_p2p_comm`,
    NeMo's `overlap_p2p_comm` with `batch_p2p_comm: false`); false = every send on the critical path
    (`--no-overlap-p2p-communication`, `batch_p2p_comm: true`); unset = the framework's default
    (FrameworkSpec.pp_p2p_overlap: on for megatron and nemo)."""
    cuda_graph_scope: list[CudaGraphScope] | None = None
    """What CUDA graphs capture, each graph replayed by one launch where its kernels were launched
    one by one (Megatron-Core `cuda_graph_impl` with `cuda_graph_scope`, since v0.18
    `cuda_graph_modules`; Megatron-Bridge's recipes): `layer` every transformer layer whole
    (Megatron-Core's `full`, an empty module list); `attn` a layer's attention block (input norm,
    projections, attention, residual add); `mlp` a dense layer's MLP block; `moe` an MoE layer
    whole (drop-and-pad routing only); `moe_router` an MoE layer's norm, router and shared experts,
    and `moe_preprocess` with it the dispatcher's metadata, the dispatch, experts and combine left
    eager; `full_iteration` the forward and backward of every micro-batch, one graph per step. A
    layer's graphs replay once per pass, its backward as a graph of its own. Megatron-Core's rules:
    `full_iteration` alone, `moe` not with `moe_router`, `moe_preprocess` with `moe_router`, full
    recompute only under `full_iteration`. Unset = none: every kernel launched from the host."""
    moe_dispatcher: Literal["alltoall", "allgather", "deepep", "hybridep"] | None = None
    """How MoE layers move tokens to their experts' ranks and back (Megatron-Core
    `moe_token_dispatcher_type`, and `moe_flex_dispatcher_backend` under `flex`): `alltoall` sends a
    token once for every routed expert on another rank (an NCCL all-to-all: Megatron-Core
    `alltoall`, torchtitan, DeepSpeed-MoE); `allgather` gathers every rank's tokens to the whole
    expert-parallel group and reduce-scatters the outputs back (Megatron-Core `allgather`); `deepep`
    and `hybridep` send a token once to each node (NVLink domain) holding one of its experts, then
    over NVLink once to each GPU there that does (DeepEP's and HybridEP's hierarchical kernels;
    DeepSeek-V3 §3.2.1), the combine reducing the same way back. Unset = alltoall."""
    moe_a2a_overlap: bool = False
    """The forward of one micro-batch runs beside the backward of the previous one, layer by layer
    on two CUDA streams, so each MoE layer's dispatch and combine hide behind the other pass's
    attention and expert compute (Megatron-Core `overlap_moe_expert_parallel_comm`, Megatron-Bridge
    `moe_a2a_overlap`; combined 1F1B, after DeepSeek-V3's DualPipe). The first forward and the last
    backward, and a pipeline's warm-up and cool-down, run unpaired. Megatron-Core's rules: ep > 1,
    no full recompute and no `moe` in `recompute_modules`, vpp > 1 when pp > 1, the alltoall or a
    flex dispatcher."""
    cp_kind: Literal["ring", "all-gather", "ulysses"] = "ring"
    """How context parallelism moves keys and values: `ring` passes K/V chunks around the CP group
    while attention runs on the previous chunk (Ring Attention; Megatron-Core / Transformer Engine
    `cp_comm_type: p2p`); `all-gather` gathers every K/V chunk once per layer, hidden only behind the local block
    (PyTorch/torchtitan's default rotate method, Megatron `cp_comm_type: all_gather`); `ulysses`
    re-shards q, k, v and the output by heads with four all-to-alls per layer, exposed
    (DeepSpeed-Ulysses, Megatron `cp_comm_type: a2a`; needs the heads per TP rank divisible by cp).
    Unstated, the framework's default (`all-gather` for torchtitan), else `ring`."""
    flash_attention: bool = True
    """Fused attention that never stores the s × s score matrix."""
    flash_attention_version: Literal[1, 2] = 2
    """Generation of that fused kernel: 2 = FlashAttention-2 or later (also PyTorch SDPA's flash
    backend); 1 = FlashAttention-1 and its Triton ports (e.g. llm-foundry's `attn_impl: triton`)."""
    attention_kernel: Literal["eager", "sdpa", "fa1", "fa2", "fa3", "cudnn"] | None = None
    """The attention kernel: `eager` (unfused, s × s scores in memory), `sdpa` (PyTorch's
    scaled_dot_product_attention: its FlashAttention-2 backend on Ampere and newer, the
    memory-efficient kernel on Volta/Turing), `fa1`, `fa2`, `fa3` (FlashAttention-3, Hopper only)
    or `cudnn` (cuDNN fused attention, Transformer Engine's choice on Hopper; sm80+). Unset = from
    `flash_attention` / `flash_attention_version` (false → eager, 1 → fa1), else cuDNN for
    megatron and nemo on Hopper, else fa2; a default the GPU cannot run falls back with a warning."""
    fp8_recipe: Literal["tensorwise", "delayed", "blockwise", "mxfp8"] | None = None
    """fp8 scaling (precision fp8 only): `delayed` (per-tensor scales from an amax history, Transformer
    Engine's DelayedScaling), `tensorwise` (current per-tensor scaling: an extra read for the amax;
    torchao's default), `blockwise` (1×128 activation / 128×128 weight blocks, DeepSeek-V3, TE
    Float8BlockScaling) or `mxfp8` (32-element blocks, Blackwell only). Unset = delayed (tensorwise
    for torchtitan)."""
    fp8_all_gather: bool = False
    """FSDP gathers the fp8 linears' weights already cast to fp8 (1 byte each) rather than in 16 bits,
    so the unsharded layer buffers are half the size (torchtitan `float8.enable_fsdp_float8_all_gather`,
    torchao's WeightWithDynamicFloat8CastTensor). Acts only with precision: fp8 under zero: 3 (a plan
    that tries other precisions or stages keeps the setting, inert there); the output head, norms and
    embedding stay 16-bit."""
    fused_kernels: bool | None = None
    """Norms, activations and rotary embeddings run as fused kernels (Megatron/Apex, torch.compile,
    Liger); false = eager PyTorch, one kernel per elementwise op (e.g. torchtitan without compile);
    unset = the framework's default (eager for HF Trainer, torchtune and LitGPT without compile),
    fused otherwise."""
    compile: bool | None = None
    """The model's layers run under torch.compile (torchtitan `compile.enable`, AutoModel
    `compile.enabled`, HF Trainer `torch_compile`): traced, their elementwise kernels fuse (the
    `fused_kernels` default becomes true) and, where tensor parallelism runs through DTensors
    (FrameworkSpec.tp_dtensor), the DTensor host work of each sharded linear is compiled away;
    unset = not compiled, except under PyTorch's async TP, an inductor pass that needs it."""
    optimizer: Literal["adamw", "adam8bit", "paged_adamw", "paged_adamw8bit", "sgd", "adafactor"] = "adamw"
    """Optimizer; decides the bytes of state per trainable parameter. The paged variants
    (bitsandbytes) keep their states in CUDA unified memory, outside PyTorch's allocator, which the
    driver pages to host memory under pressure."""
    optimizer_moment_dtype: Literal["fp32", "bf16", "fp16"] | None = None
    """Element type of the optimizer's moments (AdamW's m and v, SGD's momentum): Megatron-Core's
    precision-aware optimizer (`use_precision_aware_optimizer` with `exp_avg_dtype` and
    `exp_avg_sq_dtype`, stepped by Transformer Engine's FusedAdam), which Megatron-Bridge's
    DeepSeek and Moonlight recipes run in bf16. Unset = fp32 under mixed precision, the training
    precision when training is pure. bitsandbytes' optimizers keep their own (an error with one)."""
    grad_reduce_dtype: Literal["fp32", "bf16", "fp16"] | None = None
    """Element type of the gradients a mixed-precision run accumulates over its micro-batches and
    reduces across data-parallel ranks: Megatron-Core DDP's `grad_reduce_in_fp32` (false = the
    parameters' 16 bits; Megatron-Bridge's `bf16_mixed` sets it true and its Llama 3 performance
    recipes false again), PyTorch FSDP2's `MixedPrecisionPolicy.reduce_dtype`. 16 bits halve the
    gradient buffer and the data-parallel reduction's bytes, and the optimizer step reads 2 bytes of
    gradient per parameter instead of 4. Unset = fp32 under mixed precision, the training precision
    when training is pure; a 16-bit type must be the training precision's (bf16 for fp8 and fp4)."""
    optimizer_in_backward: bool = False
    """Each parameter is stepped as soon as its gradient is ready and the gradient is freed
    (torchtune `optimizer_in_bwd`), so the whole gradient set never exists at once."""
    master_weights: bool = True
    """Mixed precision keeps an fp32 master copy of the weights (with fp32 gradients) beside the
    16-bit ones; false = pure low-precision training: weights, gradients and optimizer states all
    in the training precision (torchtune `dtype: bf16`, LitGPT `bf16-true`)."""
    method: Literal["full", "lora", "qlora"] = "full"
    """Full fine-tuning/pre-training, or adapters on a frozen base (bf16 base for LoRA, 4-bit for QLoRA)."""
    lora_rank: int = Field(default=16, gt=0, le=MAX_WIDTH)
    """Adapter rank for LoRA/QLoRA."""
    lora_dropout: float | None = Field(default=None, ge=0, lt=1)
    """LoRA/QLoRA: dropout on each adapter's input (PEFT `lora_dropout`, torchtune `lora_dropout`,
    NeMo AutoModel `peft.dropout`); above 0 every adapted input is copied, with a 1-byte mask, for
    backward. Unset = the framework's default (PEFT 0.05; torchtune, Unsloth and AutoModel 0)."""
    lora_targets: LoraTargets = "all-linear"
    """Which linears carry adapters: `all-linear`, `attention` (q, k, v, o) or a list of
    q, k, v, o, gate, up, down (Hugging Face, torchtune and LitGPT module names are accepted). On a
    latent-attention model q adapts its query linears and k or v its key/value down and up projections."""
    train_embeddings: bool = False
    """LoRA/QLoRA: the embedding and output head are trained in full beside the adapters."""
    quantization: Literal["none", "nf4", "nf4-double", "int8", "gptq-int4"] | None = None
    """Storage of the frozen base weights of the transformer layers; unset = `nf4-double` for
    qlora, `none` otherwise. NF4: 4 bits plus an fp32 absmax per block of 64; `nf4-double` also
    quantizes those constants (Dettmers et al. 2023); int8: LLM.int8 with an fp32 scale per row;
    gptq-int4: 4 bits plus a 16-bit scale and a 4-bit zero per group of 128."""
    loss: Literal["full", "chunked", "fused", "fused_linear"] = "full"
    """Cross-entropy: `full` (PyTorch's) materializes the fp32 logits of the whole micro-batch;
    `chunked` upcasts one chunk at a time (torchtune CEWithChunkedOutputLoss, LitGPT chunked CE);
    `fused` is one kernel over the 16-bit logits that writes their gradient in place (flash-attn's
    CrossEntropyLoss with inplace_backward, llm-foundry's default `fused_crossentropy`);
    `fused_linear` never materializes the logits (Liger, Unsloth)."""
    loss_upcast: bool = True
    """`loss: full` computes its log-softmax and gradients in fp32: torch.autocast runs cross-entropy
    in fp32, and most model code calls `logits.float()` (Hugging Face Llama-family models). false =
    in the 16-bit training precision, half the bytes per logit: a model cast to 16 bits with no
    autocast (DeepSpeed's engine; accelerate turns native AMP off under DeepSpeed) whose code does
    not upcast its logits (e.g. Qwen-1's modeling_qwen.py)."""
    loss_shift_copy: bool = False
    """`loss: full` shifts the logits for next-token prediction with a contiguous copy: Hugging Face
    transformers before its January 2025 loss change (`shift_logits = logits[..., :-1,
    :].contiguous()` on the fp32-upcast logits, in the Llama-family models' forward and then in
    ForCausalLMLoss, removed by huggingface/transformers#35646) and model code written the same way
    (Qwen-1's modeling_qwen.py). The copy lives only in the forward, beside the 16-bit logits the
    model returns, their upcast and the log-softmax (e + 12 bytes per logit upcast, 3e in 16 bits),
    which outlasts the backward's 12 when upcast; it costs its traffic either way. false = the labels
    are shifted instead (today's transformers, torchtitan, torchtune)."""
    vocab_padding_multiple: int | None = Field(default=None, ge=1, le=65536)
    """The output layer's vocabulary as the stack rounds it up: to a multiple of this on every
    tensor-parallel rank (Megatron-Core's `make-vocab-size-divisible-by` 128, times tp; LitGPT's
    `padding_multiple` 512; nanoGPT and llm.c run GPT-2's 50257 as 50304). 1 = the checkpoint's
    vocabulary as it is (Hugging Face, torchtune). A head whose local vocabulary is not a multiple
    of 8 (16 bytes of 16-bit elements) runs its three GEMMs on cuBLAS's unaligned kernels, at
    `misaligned_gemm_fraction` of the aligned rate. Unset = the framework's; a custom stack is
    taken to pad to 8, named in the assumptions when the vocabulary needs it."""
    activation_offload: bool = False
    """The activations saved for backward are copied to host memory on a side stream and brought back
    for backward (torchtune `enable_activation_offloading`)."""
    activation_offload_layers: int | None = Field(default=None, gt=0, le=MAX_LAYERS)
    """With `activation_offload`: how many of a pipeline stage's layers offload theirs, the others
    keeping theirs on the GPU (Megatron-Core `cpu_offloading_num_layers`, which Megatron-Bridge's
    Llama 3 70B Megatron-FSDP recipes set to 5–40). Given without `activation_offload`, it means
    true. Unset = every layer."""
    dropout: bool = False
    """Dropout after attention and MLP (GPT-2/3-era recipes); stores a 1-byte mask per element."""
    tokens: float | None = Field(default=None, gt=0, le=MAX_TOKENS)
    """Training tokens in total, for total time and cost (a finite number, at most 1e18)."""
    offload: Literal["none", "optimizer", "parameters", "all"] = "none"
    """What lives off the GPU: `optimizer` = ZeRO-Offload (optimizer states and the step on the CPU,
    gradients down and weights up over PCIe every step); `parameters` = the weight shards too,
    gathered per layer (ZeRO-Infinity `offload_param`, FSDP `cpu_offload`); `all` = both."""
    offload_device: Literal["cpu", "nvme"] = "cpu"
    """Where offloaded state lives: host RAM, or NVMe (ZeRO-Infinity) streamed through host RAM."""
    packing: bool = True
    """Samples are packed into full `seq_len` sequences; false = each sample padded to the longest
    in its micro-batch: memory peaks at `seq_len`, and only `mean_seq_len` tokens per sample count."""
    mean_seq_len: int | None = Field(default=None, gt=0, le=MAX_SEQ_LEN)
    """Mean real tokens per sample when unpacked (null = seq_len)."""
    packed_sample_len: int | None = Field(default=None, gt=0, le=MAX_SEQ_LEN)
    """Packed samples attend only within themselves (document masking), this many tokens per sample
    on average: torchtune's packed datasets (flex attention with a block-causal document mask),
    FlashAttention's varlen kernels (`cu_seqlens`; HF `DataCollatorWithFlattening`), Megatron-Core's
    THD format. A fused kernel then skips the key tiles outside each sample. Null = every token of
    a packed sequence attends to all earlier ones (causal over seq_len)."""
    framework: Framework = "custom"
    """The training stack: its kernels, host overheads, and which layouts and savers it supports
    (catalog `frameworks`); `custom` = no framework-specific facts."""
    data_format: Literal["pretokenized", "text"] = "pretokenized"
    """Dataset on disk as token ids (collated by the loader) or raw text (tokenized on the fly)."""
    loader_workers_per_gpu: int = Field(default=2, ge=0, le=MAX_GPUS)
    """Data-loader worker processes per GPU (PyTorch DataLoader num_workers)."""
    checkpoint_interval_steps: int | None = Field(default=None, gt=0, le=MAX_BATCH)
    """Steps between checkpoints; null = checkpoint writes not modelled."""

    @model_validator(mode="after")
    def _recompute_modules_imply_selective(self) -> TrainingSpec:
        """A module list with no `recompute` given is Megatron-Core's selective granularity; each
        module listed once."""
        if self.recompute_modules is None:
            return self
        object.__setattr__(self, "recompute_modules", list(dict.fromkeys(self.recompute_modules)))
        if "recompute" not in self.model_fields_set:
            object.__setattr__(self, "recompute", "selective")
        return self

    @model_validator(mode="after")
    def _offload_layers_imply_offload(self) -> TrainingSpec:
        """A layer count with no `activation_offload` given is Megatron-Core's `cpu_offloading`."""
        if self.activation_offload_layers is not None and "activation_offload" not in self.model_fields_set:
            object.__setattr__(self, "activation_offload", True)
        return self

    @model_validator(mode="after")
    def _attention_aliases(self) -> TrainingSpec:
        """`attention_kernel`, when given, sets the legacy `flash_attention*` fields to agree with it
        (so a job written back out reads the same); given as well, they must agree already."""
        kernel = self.attention_kernel
        if kernel is None:
            return self
        fused, version = kernel != "eager", 1 if kernel == "fa1" else 2
        given = self.model_fields_set
        if "flash_attention" in given and self.flash_attention != fused:
            raise TrainrigError("training.attention_kernel", f"{kernel} contradicts flash_attention:"
                                                             f" {str(self.flash_attention).lower()}; give one of them.")
        versioned = fused and kernel != "sdpa"
        if "flash_attention_version" in given and versioned and self.flash_attention_version != version:
            raise TrainrigError("training.attention_kernel", f"{kernel} contradicts flash_attention_version:"
                                                             f" {self.flash_attention_version}; give one of them.")
        object.__setattr__(self, "flash_attention", fused)
        if kernel != "sdpa":
            object.__setattr__(self, "flash_attention_version", version)
        return self

    @property
    def dp_degree(self) -> int:
        """The resolved data-parallel degree (only valid inside a Job, where `auto` is resolved)."""
        if self.dp == "auto":
            raise TrainrigError("training.dp", "is still 'auto'; resolve it inside a Job.")
        return self.dp

    @property
    def base_quantization(self) -> str:
        """The frozen base's storage, with qlora's default (NF4 with double quantization) resolved."""
        if self.quantization is not None:
            return self.quantization
        return "nf4-double" if self.method == "qlora" else "none"

    @property
    def lora_modules(self) -> tuple[str, ...]:
        """The adapted linears as names from LORA_MODULES."""
        targets = self.lora_targets
        return LORA_TARGET_SETS[targets] if isinstance(targets, str) else targets

    def kernels_fused(self, framework_default: bool | None) -> bool:
        """Whether elementwise kernels are fused: as set, else under torch.compile, else the
        framework's default, else yes."""
        if self.fused_kernels is not None:
            return self.fused_kernels
        if self.compile:
            return True
        return True if framework_default is None else framework_default

    def compiled(self, micro_pipeline_tp: bool) -> bool:
        """Whether the layers run under torch.compile: when set, or when PyTorch's async TP
        (`micro_pipeline_tp`, FrameworkSpec.tp_overlap_micro_pipeline) runs, which only inductor does."""
        return bool(self.compile) or (micro_pipeline_tp and self.tp_comm_overlap and self.tp > 1)

    @property
    def real_seq_len(self) -> int:
        """Real (non-padding) tokens per sample."""
        return self.seq_len if self.packing or self.mean_seq_len is None else min(self.mean_seq_len, self.seq_len)

    @property
    def model_parallel(self) -> int:
        """GPUs one model replica spans: tp · pp · cp."""
        return self.tp * self.pp * self.cp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per optimizer step on one pipeline (= grad_accum)."""
        return self.grad_accum or self.global_batch // (self.micro_batch * self.dp_degree)


class NetworkSpec(FrozenSpec):
    """The network between nodes: a port type and how many ports each node has."""

    link: Link
    """The port: its speed, latency and efficiency."""
    ports_per_node: int = Field(gt=0, le=MAX_GPUS)
    """NICs per node used for training traffic."""

    @property
    def node_bandwidth_gbs(self) -> float:
        """All ports together, per direction, GB/s."""
        return self.link.bandwidth_gbs * self.ports_per_node


class HardwareSpec(FrozenSpec):
    """The machines: GPU type and count, the links between them, and the host around them."""

    gpu: GPU
    """The accelerator."""
    n_gpus: int = Field(gt=0, le=MAX_GPUS)
    """GPUs in the job (at most ten million)."""
    gpus_per_node: int = Field(default=8, gt=0, le=MAX_GPUS)
    """GPUs per node (server)."""
    intra_node: Link
    """Link between GPUs inside a node: a scale-up fabric, or the PCIe link when there is none."""
    inter_node: NetworkSpec | None = None
    """Network between nodes; absent for a single node."""
    host_link: Link
    """Each GPU's link to its host: its PCIe slot, or NVLink-C2C on Grace superchips (GPU.host_link)."""
    gpus_per_pcie_switch: int = Field(default=1, gt=0, le=MAX_GPUS)
    """GPUs that share one upstream PCIe link to the CPU (2 on many 8-GPU PCIe servers)."""
    cpu: CPU | None = None
    """The host CPU model, when known."""
    cpu_cores_per_node: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    """Physical CPU cores per node."""
    ram_gb_per_node: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    """Host RAM per node in GB."""
    host_memory: HostMemory | None = None
    """DDR speed grade of the host RAM, when known."""
    storage: Storage | None = None
    """Where the dataset is read from and checkpoints are written to."""
    profile: HardwareProfile | None = None
    """Measured ceilings that replace datasheet numbers."""

    @property
    def n_nodes(self) -> int:
        return -(-self.n_gpus // self.gpus_per_node)

    @property
    def gpus_in_node(self) -> int:
        """GPUs actually used in each node (fewer than gpus_per_node on a partial single node)."""
        return min(self.n_gpus, self.gpus_per_node)


class Job(FrozenSpec):
    """A model, trained a certain way on certain hardware; `dp` and `grad_accum` are resolved here."""

    model: ModelSpec
    """What is trained."""
    hardware: HardwareSpec
    """Where it is trained."""
    training: TrainingSpec = TrainingSpec()
    """How it is trained."""
    framework: FrameworkSpec = CUSTOM_FRAMEWORK
    """The facts of `training.framework` (the loader resolves them from the catalog)."""
    notes: tuple[str, ...] = ()
    """Things the loader decided on the user's behalf (alias resolution, defaults)."""

    @model_validator(mode="after")
    def _resolve_and_check(self) -> Job:
        training = self.training
        if training.zero is None:  # the framework's recipes' default, still unstated (estimate's assumptions)
            training = training.model_copy(update={"zero": self.framework.default_zero})
            object.__setattr__(training, "__pydantic_fields_set__", training.model_fields_set - {"zero"})
        training = _framework_defaults(self.framework, training)
        if self.framework.pipeline_end_slots_when_uneven and _ends_make_the_split_even(self.model, training):
            given = training.model_fields_set  # the only even split Megatron-Core runs, still unstated
            training = training.model_copy(update={"account_for_embedding_in_pipeline_split": True,
                                                   "account_for_loss_in_pipeline_split": True})
            object.__setattr__(training, "__pydantic_fields_set__", given)
        training = _resolved_training(self.model, self.hardware, training)
        object.__setattr__(self, "training", training)
        _check_parallelism(self.model, self.hardware, training)
        _check_finetuning(training)
        if training.framework != self.framework.id:
            note = (f"training.framework is {training.framework}, but the job carries {self.framework.id}'s facts;"
                    " load_job resolves them from the catalog")
            object.__setattr__(self, "notes", (*self.notes, note))
        return self

    def projections_fused(self) -> tuple[bool, bool]:
        """(q/k/v one linear, gate/up one linear): as the model says, else as the framework's own
        model code has them, else fused (one linear each). Multi-head latent attention has no q/k/v
        linear to fuse: its query and key/value paths are linears of their own."""
        m, fw = self.model, self.framework
        qkv = m.fused_qkv if m.fused_qkv is not None else fw.fused_qkv
        gate_up = m.fused_gate_up if m.fused_gate_up is not None else fw.fused_gate_up
        return qkv is not False and not m.is_mla, gate_up is not False


def _resolved_training(model: ModelSpec, hw: HardwareSpec, t: TrainingSpec) -> TrainingSpec:
    if t.decoder_first_pipeline_num_layers is not None or t.decoder_last_pipeline_num_layers is not None:
        t = t.model_copy(update={"pipeline_layers": _pipeline_layers(model, t),
                                 "decoder_first_pipeline_num_layers": None, "decoder_last_pipeline_num_layers": None})
    if t.dp == "auto":
        if hw.n_gpus % t.model_parallel:
            raise TrainrigError(
                _layout_culprit(t, hw.n_gpus),
                f"tp·pp·cp = {t.model_parallel} does not divide hardware.n_gpus = {hw.n_gpus}.",
            )
        t = t.model_copy(update={"dp": hw.n_gpus // t.model_parallel})
    dp = t.dp_degree
    if t.model_parallel * dp != hw.n_gpus:
        raise TrainrigError(
            "training.dp",
            f"dp·tp·pp·cp = {dp}·{t.tp}·{t.pp}·{t.cp} = {dp * t.model_parallel} but hardware.n_gpus"
            f" = {hw.n_gpus}; use dp: {hw.n_gpus // t.model_parallel} or dp: auto.",
        )
    if t.global_batch % (t.micro_batch * dp):
        raise TrainrigError(
            "training.global_batch",
            f"{t.global_batch} is not a multiple of micro_batch·dp = {t.micro_batch * dp};"
            f" try {_round_up(t.global_batch, t.micro_batch * dp)}.",
        )
    accum = t.global_batch // (t.micro_batch * dp)
    if t.grad_accum is not None and t.grad_accum != accum:
        raise TrainrigError(
            "training.grad_accum",
            f"{t.grad_accum} disagrees with global_batch / (micro_batch·dp) = {accum}.",
        )
    return t.model_copy(update={"grad_accum": accum})


def _layout_culprit(t: TrainingSpec, n_gpus: int) -> str:
    """The first degree, in the order tp, pp, cp, whose product with those before it stops dividing
    n_gpus: the field to blame (a bad pp is not tp's fault)."""
    product = 1
    for name in ("tp", "pp", "cp"):
        product *= getattr(t, name)
        if n_gpus % product:
            return f"training.{name}"
    return "training.tp"


def _check_parallelism(model: ModelSpec, hw: HardwareSpec, t: TrainingSpec) -> None:
    if model.n_heads % t.tp:
        raise TrainrigError(
            "training.tp",
            f"{t.tp} does not divide the model's {model.n_heads} attention heads;"
            f" valid: {divisors_text(model.n_heads)}.",
        )
    if model.kv_heads % t.tp and t.tp % model.kv_heads:
        raise TrainrigError(
            "training.tp",
            f"{t.tp} neither divides nor is a multiple of the {model.kv_heads} key/value heads.",
        )
    if model.n_mamba_layers and model.mamba_groups % t.tp:
        # Megatron-Core MambaMixer splits B and C by groups over TP (it asserts ngroups % tp == 0)
        raise TrainrigError("training.tp", f"{t.tp} does not divide the model's {model.mamba_groups} Mamba groups;"
                            f" valid: {divisors_text(model.mamba_groups)}.")
    _check_pipeline_split(model, t)
    if t.seq_len % t.cp:
        raise TrainrigError("training.cp", f"{t.cp} does not divide seq_len {t.seq_len}.")
    _check_experts(model, t)
    _check_overlap(model, t)
    _check_recompute_layers(model, t)
    if hw.n_gpus > hw.gpus_per_node and hw.n_gpus % hw.gpus_per_node:
        raise TrainrigError(
            "hardware.n_gpus",
            f"{hw.n_gpus} GPUs do not fill whole nodes of {hw.gpus_per_node};"
            f" use a multiple of {hw.gpus_per_node}.",
        )
    if hw.gpu.peak(t.precision) is None:
        valid = [p for p in ("fp32", "fp16", "bf16", "fp8", "fp4") if hw.gpu.peak(p) is not None]
        raise TrainrigError(
            "training.precision",
            f"{hw.gpu.id} has no {t.precision} support; valid: {', '.join(valid)}.",
        )
    _check_kernels(hw, t)


def _check_kernels(hw: HardwareSpec, t: TrainingSpec) -> None:
    """An attention kernel or fp8 recipe the job names must be one the GPU runs."""
    gpu, kernel = hw.gpu, t.attention_kernel
    if kernel is not None and kernel not in gpu.attention_kernels:
        raise TrainrigError("training.attention_kernel", f"{gpu.id} ({gpu.architecture}) cannot run {kernel};"
                                                         f" valid: {', '.join(gpu.attention_kernels)}.")
    if t.fp8_recipe is not None and t.precision != "fp8":
        raise TrainrigError("training.fp8_recipe", f"applies to precision: fp8, not {t.precision}.")
    if t.fp8_recipe is not None and t.fp8_recipe not in gpu.fp8_recipes:
        raise TrainrigError("training.fp8_recipe", f"{gpu.id} ({gpu.architecture}) cannot run {t.fp8_recipe}"
                                                   f" scaling; valid: {', '.join(gpu.fp8_recipes)}.")


def _check_finetuning(t: TrainingSpec) -> None:
    """Combinations no stack runs: each is one sentence naming the field."""
    quantized = t.base_quantization != "none"
    if quantized and t.method == "full":
        raise TrainrigError("training.quantization",
                            f"{t.base_quantization} base weights are frozen; train them with method: lora or qlora.")
    if t.method == "qlora" and not quantized:
        raise TrainrigError("training.quantization", "qlora is LoRA over a quantized base; use nf4, nf4-double, "
                                                     "int8 or gptq-int4, or method: lora.")
    if t.train_embeddings and t.method == "full":
        raise TrainrigError("training.train_embeddings", "applies to lora/qlora; a full fine-tune trains them anyway.")
    _check_grad_reduce_dtype(t)
    if t.optimizer_moment_dtype is not None and t.optimizer not in ("adamw", "sgd", "adafactor"):
        raise TrainrigError("training.optimizer_moment_dtype", f"{t.optimizer} keeps its states in its own format;"
                                                               " use optimizer: adamw (or leave the field unset).")
    if t.optimizer_in_backward and t.micro_batches > 1:
        raise TrainrigError("training.optimizer_in_backward",
                            f"steps after every backward, so it cannot accumulate {t.micro_batches} micro-batches;"
                            " use grad_accum 1 (global_batch = micro_batch·dp).")
    if t.offload in ("parameters", "all") and t.zero < 3 and t.dp_degree * t.cp > 1:
        raise TrainrigError("training.offload", f"{t.offload} offload shards the weights: it needs zero: 3.")
    if t.offload_device == "nvme" and t.offload == "none":
        raise TrainrigError("training.offload_device", "nvme needs something offloaded (offload: optimizer, "
                                                        "parameters or all).")
    if t.mean_seq_len is not None and t.mean_seq_len > t.seq_len:
        raise TrainrigError("training.mean_seq_len",
                            f"{t.mean_seq_len} exceeds seq_len {t.seq_len}, the longest sample.")
    if t.packed_sample_len is not None and not t.packing:
        raise TrainrigError("training.packed_sample_len", "describes packed samples; with packing: false give"
                                                          " mean_seq_len instead.")
    if t.packed_sample_len is not None and t.packed_sample_len > t.seq_len:
        raise TrainrigError("training.packed_sample_len",
                            f"{t.packed_sample_len} exceeds seq_len {t.seq_len}, the packed sequence.")


def _framework_defaults(framework: FrameworkSpec, t: TrainingSpec) -> TrainingSpec:
    """The stack's recipes' values for the training fields the job did not state, still unstated
    (the estimate names them in its assumptions)."""
    given = t.model_fields_set
    update = {field: value for field, value in (("cp_kind", framework.default_cp_kind),
                                                ("loss", framework.default_loss),
                                                ("optimizer", framework.default_optimizer),
                                                ("master_weights", framework.default_master_weights),
                                                ("vocab_padding_multiple", framework.vocab_padding_multiple))
              if value is not None and field not in given}
    if framework.default_recompute is not None and not {"recompute", "activation_offload"} & given:
        update.update(recompute=framework.default_recompute, activation_offload=framework.default_activation_offload)
    if not update:
        return t
    t = t.model_copy(update=update)
    object.__setattr__(t, "__pydantic_fields_set__", given)
    return t


def _ends_make_the_split_even(model: ModelSpec, t: TrainingSpec) -> bool:
    """Whether the layers alone split unevenly over pp·vpp but the layers and both ends do, and the
    job sized no stage itself (FrameworkSpec.pipeline_end_slots_when_uneven)."""
    chunks = t.pp * t.vpp
    stated = {"account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "pipeline_layers",
              "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"} & t.model_fields_set
    return (t.pp > 1 and not stated and model.n_layers % chunks != 0
            and (model.n_layers + 2) % chunks == 0)


def _pipeline_layers(model: ModelSpec, t: TrainingSpec) -> tuple[int, ...] | None:
    """Megatron-Core's first/last-stage layer counts as the per-stage list: the layers left split
    evenly over the stages between (Megatron-Core refuses a remainder, and so do we)."""
    first, last = t.decoder_first_pipeline_num_layers, t.decoder_last_pipeline_num_layers
    if first is None and last is None:
        return t.pipeline_layers
    field = "training.decoder_first_pipeline_num_layers" if first is not None else (
        "training.decoder_last_pipeline_num_layers")
    if t.pipeline_layers is not None:
        raise TrainrigError(field, "gives part of the split that pipeline_layers gives whole; set one of them.")
    ends = [n for n in (first, last) if n is not None]
    middle_stages, middle_layers = t.pp - len(ends), model.n_layers - sum(ends)
    if t.pp < 2 or middle_layers < 0 or (middle_stages == 0 and middle_layers) or (
            middle_stages and middle_layers % middle_stages):
        raise TrainrigError(field, f"leaves {middle_layers} of the {model.n_layers} layers for {middle_stages}"
                                   f" other stage(s) of pp {t.pp}, which do not split them evenly.")
    each = middle_layers // middle_stages if middle_stages else 0
    return ((first,) if first is not None else ()) + (each,) * middle_stages + ((last,) if last is not None else ())


def _check_explicit_pipeline(model: ModelSpec, t: TrainingSpec) -> None:
    layers = t.pipeline_layers
    if layers is None:
        return
    if len(layers) != t.pp or sum(layers) != model.n_layers or min(layers) < 0:
        raise TrainrigError("training.pipeline_layers", f"needs pp = {t.pp} counts of zero or more that sum to the"
                                                        f" model's {model.n_layers} layers (got {list(layers)}).")
    if t.account_for_embedding_in_pipeline_split or t.account_for_loss_in_pipeline_split:
        raise TrainrigError("training.pipeline_layers", "places every stage's layers itself; the"
                                                        " account_for_*_in_pipeline_split slots do not apply.")


def _check_pipeline_split(model: ModelSpec, t: TrainingSpec) -> None:
    """Any pp·vpp up to the layer count: an uneven split is paced by its fullest stage (see
    Inputs.layers_per_stage), but every pipeline chunk needs a layer, or the embedding or loss where
    they take a slot (Megatron-MoE-ModelZoo runs Qwen3-235B's 94 layers and both ends on pp 32 × vpp 3)."""
    _check_explicit_pipeline(model, t)
    ends = int(t.account_for_embedding_in_pipeline_split) + int(t.account_for_loss_in_pipeline_split)
    if t.pp * t.vpp > model.n_layers + (ends if t.pp > 1 else 0):
        field = "training.vpp" if t.pp <= model.n_layers else "training.pp"
        counted = f" and {ends} end slot{'s' if ends > 1 else ''}" if ends else ""
        raise TrainrigError(field, f"pp·vpp = {t.pp * t.vpp} exceeds the model's {model.n_layers} layers{counted};"
                                   " every pipeline chunk needs at least one.")
    if t.vpp > 1 and t.pp == 1:
        raise TrainrigError("training.vpp", "interleaving (vpp > 1) needs pipeline parallelism (pp > 1).")
    if t.dp_shard is not None and t.dp_degree % t.dp_shard:
        raise TrainrigError("training.dp_shard", f"{t.dp_shard} does not divide dp = {t.dp_degree};"
                                                 f" valid: {divisors_text(t.dp_degree)}.")
    if t.pp_schedule == "gpipe" and t.vpp > 1:
        raise TrainrigError("training.pp_schedule", "GPipe runs one model chunk per stage; use vpp: 1 or 1f1b.")
    _check_pp_local_batch(t)
    names = [n for n in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
             if getattr(t, n)]
    if names and t.pp == 1:
        raise TrainrigError(f"training.{names[0]}", "counts a pipeline slot, so it needs pp > 1.")
    slots = model.n_layers + len(names)
    if names and slots % (t.pp * t.vpp):  # Megatron-Core TransformerConfig.__post_init__ refuses it too
        raise TrainrigError(f"training.{names[0]}", f"Megatron-Core needs the {slots} layer-slots (layers + ends)"
                                                   f" to be a multiple of pp·vpp = {t.pp * t.vpp}.")


def _check_pp_local_batch(t: TrainingSpec) -> None:
    """A schedule run takes whole micro-batches, and a step whole schedule runs."""
    local = t.pp_local_batch
    if local is None:
        return
    if t.pp == 1:
        raise TrainrigError("training.pp_local_batch", "sizes a pipeline schedule's run, so it needs pp > 1.")
    if local % t.micro_batch:
        raise TrainrigError("training.pp_local_batch", f"{local} is not a multiple of micro_batch {t.micro_batch}.")
    per_pipeline = t.micro_batches * t.micro_batch
    if per_pipeline % local:
        raise TrainrigError("training.pp_local_batch", f"{local} does not divide the step's {per_pipeline} sequences"
                                                       " per pipeline (global_batch / dp); use a multiple of"
                                                       f" micro_batch {t.micro_batch} that does.")


def _check_recompute_layers(model: ModelSpec, t: TrainingSpec) -> None:
    if t.activation_offload_layers is not None and t.activation_offload_layers > model.n_layers:
        raise TrainrigError("training.activation_offload_layers", f"{t.activation_offload_layers} is more than the"
                                                                  f" model's {model.n_layers} layers.")
    if t.recompute_num_layers is not None and t.recompute_num_layers > model.n_layers:
        raise TrainrigError("training.recompute_num_layers", f"{t.recompute_num_layers} is more than the model's"
                                                            f" {model.n_layers} layers.")


def _check_overlap(model: ModelSpec, t: TrainingSpec) -> None:
    """TP overlap and the CP kinds: what Megatron-Core, torchtitan and DeepSpeed accept."""
    _check_moe_a2a_overlap(model, t)
    _check_cuda_graphs(model, t)
    if t.tp_comm_overlap and t.tp > 1 and not t.sequence_parallel:
        raise TrainrigError("training.tp_comm_overlap", "overlaps the all-gathers and reduce-scatters of sequence"
                                                        " parallelism; set sequence_parallel: true or turn it off.")
    if t.cp_kind == "ulysses" and t.cp > 1 and (model.n_heads // t.tp) % t.cp:
        raise TrainrigError("training.cp_kind", f"ulysses splits the {model.n_heads // t.tp} attention heads per"
                                                f" TP rank over cp = {t.cp}, which does not divide them; use ring"
                                                " or all-gather.")


def _check_grad_reduce_dtype(t: TrainingSpec) -> None:
    """16-bit gradients come in the parameters' 16 bits: the training precision's (bf16 beside fp8)."""
    wanted = t.grad_reduce_dtype
    if wanted in (None, "fp32"):
        return
    sixteen = "fp16" if t.precision == "fp16" else "bf16"
    if t.precision == "fp32" or wanted != sixteen:
        have = "fp32 training keeps fp32 parameters" if t.precision == "fp32" else f"{t.precision} training's 16-bit" \
            f" parameters are {sixteen}"
        raise TrainrigError("training.grad_reduce_dtype", f"{wanted} gradients need {wanted} parameters; {have}.")


def _check_cuda_graphs(model: ModelSpec, t: TrainingSpec) -> None:
    """Megatron-Core's rules for what CUDA graphs may capture (TransformerConfig.__post_init__)."""
    scope, field = set(t.cuda_graph_scope or ()), "training.cuda_graph_scope"
    if not scope:
        return
    if "full_iteration" in scope and len(scope) > 1:
        raise TrainrigError(field, "full_iteration captures the whole step; list it alone.")
    if {"moe", "moe_router"} <= scope:
        raise TrainrigError(field, "moe captures the whole MoE layer, moe_router its router only: give one.")
    if "moe_preprocess" in scope and "moe_router" not in scope:
        raise TrainrigError(field, "moe_preprocess is captured with the router: add moe_router.")
    if scope & {"moe", "moe_router", "moe_preprocess"} and not model.is_moe:
        raise TrainrigError(field, "moe, moe_router and moe_preprocess capture MoE layers; this model has none.")
    if "mlp" in scope and model.n_moe_layers == model.n_layers:
        raise TrainrigError(field, "mlp captures dense MLP blocks; every layer of this model is MoE.")
    if t.recompute == "full" and scope != {"full_iteration"}:
        raise TrainrigError(field, "Megatron-Core runs full recompute only under full_iteration graphs.")


def _check_moe_a2a_overlap(model: ModelSpec, t: TrainingSpec) -> None:
    """Megatron-Core's rules for pairing micro-batches (TransformerConfig.__post_init__)."""
    if not t.moe_a2a_overlap:
        return
    field = "training.moe_a2a_overlap"
    if not model.is_moe or t.ep == 1:
        raise TrainrigError(field, "hides expert-parallel all-to-alls, so it needs an MoE model and ep > 1.")
    if t.recompute == "full" or "moe" in (t.recompute_modules or []):
        raise TrainrigError(field, "Megatron-Core does not pair micro-batches under full recompute or a"
                                   " recomputed moe module.")
    if t.pp > 1 and t.vpp == 1:
        raise TrainrigError(field, "Megatron-Core pairs micro-batches only in the interleaved schedule"
                                   " when pp > 1: give vpp > 1.")
    if t.moe_dispatcher == "allgather":
        raise TrainrigError(field, "Megatron-Core pairs micro-batches with the alltoall or a flex dispatcher,"
                                   " not allgather.")


# Base storages PEFT's prepare_model_for_kbit_training casts beside: bitsandbytes' 4- and 8-bit. It
# skips the cast for GPTQ (and AQLM, EETQ, HQQ, torchao) bases (peft/utils/other.py: `if not
# is_gptq_quantized and not is_aqlm_quantized ...: # cast all non INT8 parameters to fp32`).
PEFT_FP32_CAST_STORAGES = ("nf4", "nf4-double", "int8")


def peft_casts_unquantized_to_fp32(t: TrainingSpec, framework: FrameworkSpec) -> bool:
    """Whether the stack's PEFT preparation keeps the base's embedding, head and norms in fp32
    (FrameworkSpec.qlora_unquantized_fp32): only over a bitsandbytes-quantized base."""
    return framework.qlora_unquantized_fp32 and t.base_quantization in PEFT_FP32_CAST_STORAGES


def expert_tp_degree(t: TrainingSpec) -> int:
    """The routed experts' tensor-parallel degree: `expert_tp`; else tp where ep fits in dp·cp
    (Megatron-Core's default); else the largest divisor of tp that lets ep·expert_tp divide
    tp·dp·cp, the folding a framework must run for such an ep (expert_tp 1 always does)."""
    if t.expert_tp is not None:
        return t.expert_tp
    if (t.dp_degree * t.cp) % t.ep == 0:
        return t.tp
    ranks = t.tp * t.dp_degree * t.cp
    return max(d for d in range(1, t.tp + 1) if t.tp % d == 0 and ranks % (t.ep * d) == 0)


def _check_experts(model: ModelSpec, t: TrainingSpec) -> None:
    if t.ep == 1 and t.expert_tp is None:
        return
    if not model.is_moe:
        field = "training.ep" if t.ep > 1 else "training.expert_tp"
        raise TrainrigError(field, "applies to the experts of an MoE model (n_experts > 0).")
    if model.n_experts % t.ep:
        raise TrainrigError(
            "training.ep",
            f"{t.ep} does not divide the {model.n_experts} experts; valid: {divisors_text(model.n_experts)}.",
        )
    if t.expert_tp is None and (t.tp * t.dp_degree * t.cp) % t.ep:
        raise TrainrigError(
            "training.ep", f"{t.ep} must divide tp·dp·cp = {t.tp * t.dp_degree * t.cp}, the ranks the experts"
            " are sharded across."
        )
    expert_tp = expert_tp_degree(t)
    if (t.tp * t.dp_degree * t.cp) % (t.ep * expert_tp):
        raise TrainrigError("training.expert_tp", f"ep · expert_tp = {t.ep * expert_tp} must divide tp·dp·cp ="
                            f" {t.tp * t.dp_degree * t.cp} (the ranks the experts are laid over).")


# Attention kernels and fp8 recipes a framework runs when the job names none. Transformer Engine's
# DotProductAttention picks FusedAttention (cuDNN) over FlashAttention on sm90 (TE
# attention/dot_product_attention/utils.py get_attention_backend), so Megatron-Core and NeMo run cuDNN
# attention on Hopper; torchao's Float8Linear, which torchtitan converts its linears with, scales
# per tensor from the current amax (Float8LinearConfig default: dynamic tensorwise).
FRAMEWORK_ATTENTION_KERNEL = {("megatron", "Hopper"): "cudnn", ("nemo", "Hopper"): "cudnn"}
FRAMEWORK_FP8_RECIPE = {"torchtitan": "tensorwise"}


def resolve_attention_kernel(t: TrainingSpec, gpu: GPU) -> tuple[str, str]:
    """(the kernel the job asks for or its default, the kernel modelled): they differ where a
    default or a legacy `flash_attention*` setting names one the GPU cannot run, which falls back to
    the best it runs (warned); `sdpa` is modelled as the backend PyTorch dispatches to."""
    if t.attention_kernel is not None:
        asked = t.attention_kernel
    elif not t.flash_attention:
        asked = "eager"
    elif t.flash_attention_version == 1:
        asked = "fa1"
    else:  # version 2 = FlashAttention-2 or later: the framework's kernel where it picks a faster one
        asked = FRAMEWORK_ATTENTION_KERNEL.get((t.framework, gpu.architecture), "fa2")
    modelled = gpu.sdpa_backend() if asked == "sdpa" else asked
    if modelled not in gpu.attention_kernels:
        modelled = gpu.sdpa_backend()  # the FlashAttention class it runs, else unfused
    return asked, modelled


def resolve_fp8_recipe(t: TrainingSpec) -> str | None:
    """The fp8 scaling recipe: as given, else the framework's default, else delayed; None off fp8."""
    if t.precision != "fp8":
        return None
    return t.fp8_recipe or FRAMEWORK_FP8_RECIPE.get(t.framework, "delayed")


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
