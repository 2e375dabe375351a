"""A PyTorch decoder built from a ModelSpec: the bench's model, random init, nothing downloaded.

What the spec describes and the bench builds: Llama-style (RMSNorm, rotary, SwiGLU, GQA, no biases)
and GPT-style (LayerNorm, learned positions, GeLU MLP, biases) blocks, explicit head_dim and
v_head_dim, tied embeddings, dropout; multi-head latent attention (DeepSeek-V2/V3); mixture-of-experts
layers (top-k router, routed and shared experts, leading dense layers); LoRA adapters on the job's
target linears (on latent attention: its query and key/value linears). What it refuses, in one
sentence each: ALiBi, a sliding window shorter than the sequence, LoRA on experts, fp8 with LoRA or
experts, fp8 on a GPU older than Ada/Hopper, int8 and GPTQ bases; QLoRA and the 8-bit and paged
optimizers without bitsandbytes. torch is imported inside the functions only.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from trainrig.errors import TrainrigError
from trainrig.specs import ModelSpec, TrainingSpec

__all__ = ["check_buildable", "check_fp8_device", "build_model", "base_param_count", "trainable_param_count",
           "PrecisionPlan", "precision_plan", "import_torch", "DROPOUT_P", "LORA_ALPHA_PER_RANK"]

DROPOUT_P = 0.1
INIT_STD = 0.02
LORA_ALPHA_PER_RANK = 1.0
"""alpha = rank: the update's scale is 1. It changes no shape nor time, only the update's size."""
LORA_PARAM_NAMES = ("lora_a", "lora_b")
# LoRA targets on latent attention, as the estimate counts them (Inputs.mla_adapted_widths): q adapts
# the query linears, k or v the key/value down and up projections
MLA_LORA_LINEARS = {"q": ("q_down", "q"), "k": ("kv_down", "kv_up"), "v": ("kv_down", "kv_up")}
ATTENTION_LINEARS = ("q", "k", "v", "o", "q_down", "kv_down", "kv_up")


def import_torch() -> Any:
    """torch, or one sentence saying how to get it."""
    try:
        import torch
    except ImportError:
        why = "is not installed; `trainrig bench` needs it: pip install 'trainrig[torch]'."
        raise TrainrigError("torch", why) from None
    return torch


def has_bitsandbytes() -> bool:
    return importlib.util.find_spec("bitsandbytes") is not None


def check_buildable(spec: ModelSpec, training: TrainingSpec) -> None:
    """Raise one sentence for what the bench cannot build or run yet."""
    if spec.is_hybrid:
        raise TrainrigError("model.layer_pattern", "hybrid models (Mamba-2 layers) are not available in bench yet.")
    if spec.position_embedding == "alibi":
        raise TrainrigError("model.position_embedding", "ALiBi attention is not available in bench yet.")
    if spec.sliding_window is not None and spec.sliding_window < training.seq_len and spec.windowed_layer_share > 0:
        windowed = spec.n_layers - (spec.full_attention_layers or 0)
        raise TrainrigError("model.sliding_window", f"a sliding_window ({spec.sliding_window}) shorter than"
                            f" seq_len ({training.seq_len}), on {windowed} of the {spec.n_layers} layers,"
                            " is not available in bench yet.")
    if spec.position_embedding == "rope" and spec.rope_head_width % 2:
        field = "model.qk_rope_head_dim" if spec.is_mla else "model.head_dim"
        raise TrainrigError(field, f"rotary embeddings need an even head width (got {spec.rope_head_width}).")
    if spec.position_embedding == "learned" and training.seq_len > (spec.max_positions or 0):
        raise TrainrigError("training.seq_len", f"exceeds the learned position table ({spec.max_positions}).")
    if spec.is_moe and training.precision == "fp8":
        raise TrainrigError("training.precision", "fp8 experts are not available in bench yet; bench it as bf16.")
    if spec.is_moe and training.method != "full" and set(training.lora_modules) - {"q", "k", "v", "o"}:
        raise TrainrigError("training.lora_targets", "LoRA on the experts' MLP linears is not available in bench yet;"
                                                     " target the attention linears (q, k, v, o).")
    _check_training(training)


def _check_training(training: TrainingSpec) -> None:
    if training.precision == "fp4":
        raise TrainrigError("training.precision", "NVFP4 linears are not available in bench yet; bench it as fp8"
                                                  " or bf16.")
    if training.precision == "fp8" and training.method != "full":
        raise TrainrigError("training.precision", "fp8 with LoRA is not available in bench yet; bench it as bf16.")
    quantization = training.base_quantization
    if quantization not in NF4_BASES and quantization != "none":
        raise TrainrigError("training.quantization", f"{quantization} bases are not available in bench yet;"
                                                     " bench runs nf4 and nf4-double.")
    if quantization in NF4_BASES and not has_bitsandbytes():
        raise TrainrigError("training.method", "QLoRA needs bitsandbytes, not available here:"
                                               " pip install bitsandbytes.")
    if training.optimizer in BITSANDBYTES_OPTIMIZERS and not has_bitsandbytes():
        raise TrainrigError("training.optimizer", f"{training.optimizer} needs bitsandbytes, not available here:"
                                                  " pip install bitsandbytes.")


NF4_BASES = {"nf4": False, "nf4-double": True}
"""NF4 base storage → whether its quantization constants are themselves quantized (QLoRA's double
quantization; bitsandbytes `compress_statistics`)."""
BITSANDBYTES_OPTIMIZERS = {"adam8bit": "AdamW8bit", "paged_adamw": "PagedAdamW", "paged_adamw8bit": "PagedAdamW8bit"}
"""The job's optimizer → its bitsandbytes class (Dettmers et al. 2022, 8-bit optimizers; paged states
in CUDA unified memory, QLoRA §3)."""


def make_optimizer(torch: Any, model: Any, training: TrainingSpec, device: str) -> Any:
    """The job's optimizer over the trainable parameters: torch's AdamW (fused on CUDA), SGD with
    momentum (the one moment the estimate counts) or Adafactor; bitsandbytes' 8-bit and paged AdamW
    (on the CPU bitsandbytes runs the paged ones unpaged)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    name = training.optimizer
    if name in BITSANDBYTES_OPTIMIZERS:
        import bitsandbytes

        return getattr(bitsandbytes.optim, BITSANDBYTES_OPTIMIZERS[name])(trainable, lr=1e-4)
    if name == "sgd":
        return torch.optim.SGD(trainable, lr=1e-3, momentum=0.9)
    if name == "adafactor":
        return torch.optim.Adafactor(trainable, lr=1e-3)
    return torch.optim.AdamW(trainable, lr=1e-4, fused=device == "cuda")


def quantize_base(torch: Any, model: Any, training: TrainingSpec, plan: PrecisionPlan, device: str) -> Any:
    """Store the frozen linears of the blocks in NF4 (bitsandbytes `Linear4bit`, 64-element blocks,
    double-quantized constants for nf4-double), as QLoRA loads a base with `load_in_4bit`; the
    embedding and the LM head stay in 16 bits, as PEFT's QLoRA recipes leave them. The adapters'
    own A and B stay trainable in their precision. Call after counting parameters: a packed 4-bit
    weight has half as many elements as the matrix."""
    if training.base_quantization not in NF4_BASES:
        return model
    import bitsandbytes

    double = NF4_BASES[training.base_quantization]
    compute = getattr(torch, plan.autocast_dtype or plan.frozen_dtype)
    _replace_block_linears(model, lambda linear: _nf4_linear(torch, bitsandbytes, linear, compute, double, device))
    return model


def _replace_block_linears(model: Any, make: Any) -> None:
    """Replace every plain `nn.Linear` inside the blocks (a LoRA linear's base included) by `make(linear)`;
    the embedding and the LM head, outside the blocks, stay as they are. The type's name is matched, not
    isinstance: a replacement may itself subclass `nn.Linear` (bitsandbytes' Linear4bit does)."""
    for block in model.blocks:
        for parent in list(block.modules()):
            for name, child in list(parent.named_children()):
                if type(child).__name__ == "Linear":
                    setattr(parent, name, make(child))


def _nf4_linear(torch: Any, bitsandbytes: Any, linear: Any, compute: Any, double: bool, device: str) -> Any:
    quantized = bitsandbytes.nn.Linear4bit(linear.in_features, linear.out_features, bias=linear.bias is not None,
                                           compute_dtype=compute, compress_statistics=double, quant_type="nf4",
                                           device="meta")
    quantized.weight = bitsandbytes.nn.Params4bit(linear.weight.data.to("cpu"), requires_grad=False,
                                                  compress_statistics=double, quant_type="nf4")
    if linear.bias is not None:
        quantized.bias = torch.nn.Parameter(linear.bias.data.to(compute), requires_grad=False)
    return quantized.to(device)  # moving a Params4bit quantizes it


def check_fp8_device(torch: Any, training: TrainingSpec, device: str) -> None:
    """fp8 GEMMs need Ada, Hopper or Blackwell tensor cores (compute capability 8.9+); the CPU
    emulates them (slowly), which is what the CPU run is for."""
    if training.precision != "fp8" or device != "cuda":
        return
    capability = tuple(torch.cuda.get_device_capability(0))
    if capability < (8, 9):
        name = torch.cuda.get_device_name(0)
        raise TrainrigError("training.precision", f"fp8 GEMMs need compute capability 8.9 or newer (Ada, Hopper,"
                                                  f" Blackwell); {name} is {capability[0]}.{capability[1]}.")


def build_model(torch: Any, spec: ModelSpec, training: TrainingSpec, n_layers: int) -> Any:
    """The decoder with `n_layers` blocks, on the CPU in float32 (the caller moves and casts it)."""
    from trainrig.bench import layers as L  # imports torch: only now

    rope = spec.position_embedding == "rope"
    blocks = [_block(L, spec, training, moe=spec.is_moe and layer >= spec.n_dense_layers) for layer in range(n_layers)]
    embed = torch.nn.Embedding(spec.vocab, spec.hidden)
    positions = torch.nn.Embedding(spec.max_positions, spec.hidden) if spec.position_embedding == "learned" else None
    head = None if spec.tied_embeddings else torch.nn.Linear(spec.hidden, spec.vocab, bias=False)
    model = L.Decoder(embed, positions, blocks, L.norm_layer(spec.norm, spec.hidden), head, spec.rope_head_width, rope,
                      recompute=training.recompute == "full")
    _init_weights(torch, model)
    if training.method != "full":
        _add_lora(L, model, training)
    if training.precision == "fp8":
        _use_fp8_linears(L, model)
    return model


def _use_fp8_linears(L: Any, model: Any) -> None:
    """Every linear of the blocks in fp8; the embedding and the LM head stay in 16 bits, as Transformer
    Engine and torchao leave them by default (the head's logits are sensitive to rounding)."""
    _replace_block_linears(model, L.Fp8Linear)


def _init_weights(torch: Any, model: Any) -> None:
    """Normal(0, 0.02) weights and zero biases (GPT-2/Llama practice): torch's default N(0, 1)
    embedding would start the loss near 60 instead of ln(vocab) and overflow fp16."""
    for module in model.modules():
        if isinstance(module, torch.nn.Linear | torch.nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
        if isinstance(module, torch.nn.Linear) and module.bias is not None:
            torch.nn.init.zeros_(module.bias)


def _block(L: Any, spec: ModelSpec, training: TrainingSpec, moe: bool) -> Any:
    rope = spec.position_embedding == "rope"
    if spec.is_mla:
        attention = L.LatentAttention(spec.hidden, spec.n_heads, spec.head_width, spec.value_head_width,
                                      spec.rope_head_width, spec.kv_lora_rank, spec.q_lora_rank, spec.norm, spec.bias,
                                      rope)
    else:
        attention = L.Attention(spec.hidden, spec.n_heads, spec.kv_heads, spec.head_width, spec.value_head_width,
                                spec.bias, rope)
    mlp = _moe_mlp(L, spec) if moe else L.Mlp(spec.hidden, spec.ffn_hidden, spec.gated_mlp, bias=spec.bias == "all")
    return L.Block(attention, mlp, spec.norm, spec.hidden, DROPOUT_P if training.dropout else 0.0)


def _moe_mlp(L: Any, spec: ModelSpec) -> Any:
    def expert(width: int) -> Any:
        return L.Mlp(spec.hidden, width, spec.gated_mlp, bias=spec.bias == "all")

    routed = [expert(spec.expert_ffn) for _ in range(spec.n_experts)]
    shared = [expert(spec.shared_ffn) for _ in range(spec.n_shared_experts)]
    return L.MoeMlp(spec.hidden, routed, shared, spec.top_k)


def _add_lora(L: Any, model: Any, training: TrainingSpec) -> None:
    """Freeze everything, then wrap the target linears of every block in a LoraLinear."""
    for p in model.parameters():
        p.requires_grad_(False)
    if training.train_embeddings:
        for module in (model.embed, model.head):
            if module is not None:
                module.weight.requires_grad_(True)
    rank, alpha = training.lora_rank, LORA_ALPHA_PER_RANK * training.lora_rank
    for block in model.blocks:
        latent = isinstance(block.attn, L.LatentAttention)
        names = {linear for name in training.lora_modules
                 for linear in (MLA_LORA_LINEARS.get(name, (name,)) if latent else (name,))}
        for name in sorted(names):
            parent = block.attn if name in ATTENTION_LINEARS else block.mlp
            base = getattr(parent, name)
            if base is not None:  # an ungated MLP has no gate to adapt; queries without a latent no q_down
                setattr(parent, name, L.LoraLinear(base, rank, alpha))


def base_param_count(model: Any) -> int:
    """Parameters of the model itself, adapters left out: what ModelSpec.n_params counts."""
    return sum(p.numel() for name, p in model.named_parameters() if name.rsplit(".", 1)[-1] not in LORA_PARAM_NAMES)


def trainable_param_count(model: Any) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@dataclass(frozen=True)
class PrecisionPlan:
    """How the bench runs the job's precision on its device."""

    weight_dtype: str
    """dtype of the trainable weights (torch attribute name: float32, bfloat16, float16)."""
    frozen_dtype: str
    """dtype of frozen (LoRA base) weights."""
    autocast_dtype: str | None
    """Autocast's compute dtype, None for none."""
    label: str
    """What ran, in words, for the result."""


def precision_plan(training: TrainingSpec, device: str) -> PrecisionPlan:
    """bf16/fp16 on CUDA: autocast over fp32 master weights (pure 16-bit weights without master
    weights); LoRA's frozen base in 16 bits as the estimate assumes. fp8 is bf16 with the blocks'
    linears in fp8 (their GEMMs through `torch._scaled_mm`, on the CPU too). On the CPU everything runs
    float32: CPU bf16 autocast exists but is slow or emulated on most CPUs, and the CPU run exists
    to exercise the code, not to measure a GPU's precision."""
    fp8 = training.precision == "fp8"
    linears = " with fp8 linears (tensorwise scaling, e4m3 operands, e5m2 gradients)" if fp8 else ""
    if device == "cpu" or training.precision == "fp32":
        asked = "" if training.precision == "fp32" else f" (the job asks {training.precision}; the CPU runs float32)"
        return PrecisionPlan("float32", "float32", None, "float32" + linears + asked)
    half = {"bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}[training.precision]
    if fp8:
        weights = "bf16 weights" if not training.master_weights else "bf16 autocast over fp32 master weights"
        return PrecisionPlan("float32" if training.master_weights else half, half,
                             half if training.master_weights else None, weights + linears)
    frozen = half if training.method != "full" else "float32"
    if not training.master_weights:
        return PrecisionPlan(half, half, None, f"{training.precision} weights (no fp32 master copy)")
    return PrecisionPlan("float32", frozen, half, f"{training.precision} autocast over fp32 master weights"
                         + (f", frozen base in {training.precision}" if frozen == half else ""))


def cast_model(torch: Any, model: Any, plan: PrecisionPlan, device: str) -> Any:
    """Move to the device; trainable weights in weight_dtype, frozen ones in frozen_dtype."""
    model = model.to(device=device, dtype=getattr(torch, plan.weight_dtype))
    if plan.frozen_dtype != plan.weight_dtype:
        for p in model.parameters():
            if not p.requires_grad:
                p.data = p.data.to(getattr(torch, plan.frozen_dtype))
    return model
