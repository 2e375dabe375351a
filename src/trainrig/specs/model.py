"""What a model is: a decoder-only transformer, dense or mixture-of-experts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from trainrig.errors import TrainrigError
from trainrig.specs.base import (
    MAX_EXPERTS,
    MAX_HEADS,
    MAX_LAYERS,
    MAX_SEQ_LEN,
    MAX_VOCAB,
    MAX_WIDTH,
    CatalogEntry,
    FrozenSpec,
)

__all__ = ["ModelSpec", "ModelPreset"]


class ModelSpec(FrozenSpec):
    """A decoder-only transformer. Parameter counts are exact for the architectures described."""

    name: str = "custom"
    """Preset id or a label for a custom model."""
    n_layers: int = Field(gt=0, le=MAX_LAYERS)
    """Transformer blocks (at most a million)."""
    hidden: int = Field(gt=0, le=MAX_WIDTH)
    """Model width d_model (at most ten million, as every width)."""
    n_heads: int = Field(gt=0, le=MAX_HEADS)
    """Query attention heads (at most a million)."""
    n_kv_heads: int | None = Field(default=None, gt=0, le=MAX_HEADS)
    """Key/value heads (GQA; 1 = MQA); defaults to n_heads (plain multi-head attention)."""
    head_dim: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    """Per-head width; defaults to hidden / n_heads."""
    ffn_hidden: int = Field(gt=0, le=MAX_WIDTH)
    """Inner width of the dense MLP (per expert width is `expert_ffn_hidden`)."""
    vocab: int = Field(gt=0, le=MAX_VOCAB)
    """Vocabulary size (as padded in the checkpoint; at most a hundred million)."""
    gated_mlp: bool = True
    """SwiGLU-style MLP with gate, up and down projections (3 matrices) instead of 2."""
    tied_embeddings: bool = False
    """Output projection shares the input embedding matrix."""
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    """RMSNorm has a scale only; LayerNorm a scale and a bias."""
    bias: Literal["none", "qkv", "all"] = "none"
    """Linear-layer biases: none (Llama), on Q/K/V only (Qwen2), on every linear (GPT-2/3)."""
    position_embedding: Literal["rope", "learned", "alibi"] = "rope"
    """Learned absolute positions add `max_positions × hidden` parameters."""
    max_positions: int | None = Field(default=None, gt=0, le=MAX_SEQ_LEN)
    """Context length of a learned position table (required with `learned`)."""
    sliding_window: int | None = Field(default=None, gt=0, le=MAX_SEQ_LEN)
    """Attention window; tokens attend at most this far back (Mistral)."""
    n_experts: int = Field(default=0, ge=0, le=MAX_EXPERTS)
    """Routed experts per MoE layer; 0 = dense model (at most a hundred thousand)."""
    top_k: int = Field(default=0, ge=0, le=MAX_EXPERTS)
    """Routed experts each token uses."""
    expert_ffn_hidden: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    """Inner width of one routed expert; defaults to ffn_hidden."""
    n_shared_experts: int = Field(default=0, ge=0, le=MAX_EXPERTS)
    """Experts every token uses (DeepSeek/Qwen-MoE style)."""
    shared_ffn_hidden: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    """Inner width of one shared expert; defaults to expert_ffn_hidden."""
    n_dense_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    """Leading layers with a dense MLP in an MoE model."""
    fused_qkv: bool | None = None
    """Whether the model code projects q, k and v with one linear (GPT-2 and Qwen-1 `c_attn`, Falcon
    and GPT-NeoX `query_key_value`, MPT `Wqkv`, Phi-3 `qkv_proj`) or with three (Llama, Mistral and
    Qwen2 `q_proj`, `k_proj`, `v_proj` in Hugging Face transformers); unset = the framework's own
    model code decides (frameworks catalog `fused_qkv`), and else one. The same weights either way:
    it changes the kernels launched, the GEMM shapes and the adapters LoRA puts on them."""
    fused_gate_up: bool | None = None
    """Whether a gated MLP's gate and up projections are one linear (Megatron-Core `linear_fc1`,
    Phi-3 `gate_up_proj`) or two (Hugging Face Llama `gate_proj`, `up_proj`; Qwen-1 `w1`, `w2`);
    unset = the framework's model code decides, and else one. Ignored for a plain MLP."""

    @model_validator(mode="after")
    def _check_shape(self) -> ModelSpec:
        if self.head_dim is None and self.hidden % self.n_heads:
            raise TrainrigError(
                "model.n_heads",
                f"{self.n_heads} heads do not divide hidden {self.hidden}; give head_dim explicitly.",
            )
        if self.n_heads % self.kv_heads:
            raise TrainrigError(
                "model.n_kv_heads",
                f"{self.kv_heads} key/value heads must divide the {self.n_heads} query heads.",
            )
        if self.position_embedding == "learned" and self.max_positions is None:
            raise TrainrigError("model.max_positions", "learned position embeddings need max_positions.")
        if self.is_moe and not 0 < self.top_k <= self.n_experts:
            raise TrainrigError(
                "model.top_k", f"must be between 1 and n_experts ({self.n_experts}) for an MoE model."
            )
        if self.n_dense_layers > self.n_layers:
            raise TrainrigError("model.n_dense_layers", f"exceeds n_layers ({self.n_layers}).")
        return self

    # ---- derived shape -------------------------------------------------------------------------

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def head_width(self) -> int:
        return self.head_dim or self.hidden // self.n_heads

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def n_moe_layers(self) -> int:
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    @property
    def expert_ffn(self) -> int:
        return self.expert_ffn_hidden or self.ffn_hidden

    @property
    def shared_ffn(self) -> int:
        return self.shared_ffn_hidden or self.expert_ffn

    # ---- parameter counts ----------------------------------------------------------------------

    def mlp_params(self, ffn: int) -> int:
        """One MLP (or expert): 3 matrices when gated, 2 when plain, plus biases where present."""
        matrices = 3 if self.gated_mlp else 2
        biases = ((matrices - 1) * ffn + self.hidden) if self.bias == "all" else 0
        return matrices * self.hidden * ffn + biases

    @property
    def attention_params_per_layer(self) -> int:
        """Q, K, V and output projections (GQA shrinks K and V), plus biases where present."""
        q_width = self.n_heads * self.head_width
        kv_width = self.kv_heads * self.head_width
        weights = 2 * self.hidden * q_width + 2 * self.hidden * kv_width
        bias = {"none": 0, "qkv": q_width + 2 * kv_width, "all": q_width + 2 * kv_width + self.hidden}
        return weights + bias[self.bias]

    @property
    def norm_params(self) -> int:
        """One normalization layer: a scale, and a bias for LayerNorm."""
        return self.hidden * (2 if self.norm == "layernorm" else 1)

    @property
    def moe_mlp_params_per_layer(self) -> int:
        """Routed experts, shared experts and the router of one MoE layer."""
        routed = self.n_experts * self.mlp_params(self.expert_ffn)
        shared = self.n_shared_experts * self.mlp_params(self.shared_ffn)
        return routed + shared + self.hidden * self.n_experts

    @property
    def layer_params(self) -> int:
        """All transformer-block parameters (every layer, both norms included)."""
        norms = 2 * self.norm_params * self.n_layers
        attention = self.attention_params_per_layer * self.n_layers
        dense_layers = self.n_layers - self.n_moe_layers
        mlp = dense_layers * self.mlp_params(self.ffn_hidden)
        mlp += self.n_moe_layers * self.moe_mlp_params_per_layer
        return norms + attention + mlp

    @property
    def embedding_params(self) -> int:
        """Token embedding, plus a learned position table where the model has one."""
        positions = self.max_positions * self.hidden if self.position_embedding == "learned" else 0
        return self.vocab * self.hidden + (positions or 0)

    @property
    def output_params(self) -> int:
        """The output (LM head) projection, zero when tied, plus the final norm."""
        head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return head + self.norm_params

    @property
    def n_params(self) -> int:
        """Total parameters, as a checkpoint counts them."""
        return self.embedding_params + self.layer_params + self.output_params

    @property
    def n_active_params(self) -> int:
        """Parameters one token passes through (routed experts counted top_k times, not n_experts)."""
        if not self.is_moe:
            return self.n_params
        inactive = (self.n_experts - self.top_k) * self.mlp_params(self.expert_ffn)
        return self.n_params - self.n_moe_layers * inactive

    @property
    def expert_params(self) -> int:
        """Routed-expert parameters of the whole model: the part expert parallelism divides."""
        return self.n_moe_layers * self.n_experts * self.mlp_params(self.expert_ffn)


class ModelPreset(CatalogEntry):
    """A named model in the catalog: its spec and the parameter count its authors publish."""

    spec: ModelSpec
    """The architecture."""
    official_params: int | None = Field(default=None, gt=0)
    """Parameter count from the model card or paper (tests compare `spec.n_params` with it)."""
    hf_id: str | None = None
    """Hugging Face repository id of the checkpoint this preset describes."""
