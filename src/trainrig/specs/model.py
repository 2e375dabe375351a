"""What a model is: a decoder-only transformer, dense or mixture-of-experts, or a hybrid of
Mamba-2, attention and MLP layers."""

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

__all__ = ["ModelSpec", "ModelPreset", "LAYER_SYMBOLS"]

# Megatron-Core's hybrid layer symbols (megatron/core/ssm/mamba_hybrid_layer_allocation.py Symbols)
LAYER_SYMBOLS = ("M", "*", "-", "E")


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
    """Per-head query/key width; defaults to hidden / n_heads. With multi-head latent attention the
    whole query/key head, its non-rotary and rotary parts together (DeepSeek-V3: 128 + 64 = 192)."""
    v_head_dim: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    """Per-head value width, which is also each head's share of the attention output; defaults to
    head_dim (DeepSeek-V2/V3: 128 against a query/key head of 192)."""
    kv_lora_rank: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    """Multi-head latent attention (MLA; DeepSeek-V2 §2.1): width of the compressed key/value latent.
    One down projection writes it (and a rotary key shared by every head), one up projection reads
    it back into every head's key and value. Unset = ordinary (grouped-query) attention."""
    q_lora_rank: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    """MLA: width of the compressed query latent (DeepSeek-V3: 1536); unset = queries are projected
    from the hidden state in one linear (DeepSeek-V2-Lite)."""
    qk_rope_head_dim: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    """MLA: the rotary part of each query/key head (DeepSeek-V2/V3: 64); its key part comes from the
    down projection, one for all heads. Required with `kv_lora_rank`."""
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
    position_embedding: Literal["rope", "learned", "alibi", "none"] = "rope"
    """Learned absolute positions add `max_positions × hidden` parameters; `none` = no position
    signal in attention (NoPE: Nemotron-H's attention layers, whose Mamba layers carry order)."""
    max_positions: int | None = Field(default=None, gt=0, le=MAX_SEQ_LEN)
    """Context length of a learned position table (required with `learned`)."""
    sliding_window: int | None = Field(default=None, gt=0, le=MAX_SEQ_LEN)
    """Attention window; tokens attend at most this far back (Mistral)."""
    full_attention_layers: int | None = Field(default=None, ge=0, le=MAX_LAYERS)
    """With `sliding_window`: how many layers attend to the whole sequence instead, the others to
    the window (Gemma 2 and GPT-OSS alternate: half of them; Gemma 3: one in six); unset = none."""
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
    layer_pattern: str | None = Field(default=None, max_length=MAX_LAYERS)
    """A hybrid model's layers, one symbol each, as Megatron-Core's `hybrid_override_pattern` and
    Hugging Face's Nemotron-H config write them: `M` a Mamba-2 mixer, `*` self-attention, `-` a
    dense MLP, `E` an MoE MLP. Each symbol is one block with its own pre-norm and residual, so
    `n_layers` counts symbols (Nemotron-H 8B: 52). Unset = every layer is attention then an MLP."""
    mamba_heads: int | None = Field(default=None, gt=0, le=MAX_HEADS)
    """Mamba-2 heads H (Nemotron-H 8B: 128); the inner width is H × mamba_head_dim. Defaults to
    2 × hidden / mamba_head_dim (Mamba-2's expand factor 2, Dao & Gu 2024 §7)."""
    mamba_head_dim: int = Field(default=64, gt=0, le=MAX_WIDTH)
    """Mamba-2 head width P (64 in Mamba-2 and Nemotron-H)."""
    mamba_state_dim: int = Field(default=128, gt=0, le=MAX_WIDTH)
    """Mamba-2 state size N per head (128 in Mamba-2 and Nemotron-H)."""
    mamba_groups: int = Field(default=8, gt=0, le=MAX_HEADS)
    """Groups of heads sharing one B and C projection (Nemotron-H: 8), like GQA's key/value heads."""
    mamba_conv_kernel: int = Field(default=4, gt=0, le=64)
    """Width of the causal depthwise convolution over x, B and C (4)."""
    mamba_chunk_size: int = Field(default=128, gt=0, le=MAX_SEQ_LEN)
    """Chunk length Q of the SSD algorithm (Dao & Gu 2024 §6): the scan is dense attention-like
    products within a chunk and a recurrence over chunk states (128 in Nemotron-H)."""

    @model_validator(mode="after")
    def _check_shape(self) -> ModelSpec:
        if self.head_dim is None and self.hidden % self.n_heads:
            raise TrainrigError(
                "model.n_heads",
                f"{self.n_heads} heads do not divide hidden {self.hidden}; give head_dim explicitly.",
            )
        self._check_latent_attention()
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
        if self.full_attention_layers is not None and (self.sliding_window is None
                                                        or self.full_attention_layers > self.n_layers):
            reason = "needs a sliding_window" if self.sliding_window is None else f"exceeds n_layers ({self.n_layers})"
            raise TrainrigError("model.full_attention_layers", f"{reason}: it counts the layers without the window.")
        if self.n_dense_layers > self.n_layers:
            raise TrainrigError("model.n_dense_layers", f"exceeds n_layers ({self.n_layers}).")
        self._check_pattern()
        return self

    def _check_pattern(self) -> None:
        """A hybrid pattern names each layer once, with symbols Megatron-Core knows, and its MoE
        layers are exactly the model's (`E` needs experts, experts need an `E`)."""
        pattern = self.layer_pattern
        if pattern is None:
            if self.mamba_heads is not None:
                raise TrainrigError("model.mamba_heads", "applies to Mamba layers; give a layer_pattern with M.")
            return
        unknown = sorted(set(pattern) - set(LAYER_SYMBOLS))
        if unknown:
            raise TrainrigError("model.layer_pattern", f"has unknown symbol(s) {''.join(unknown)!r}; use M (Mamba-2),"
                                " * (attention), - (MLP) and E (MoE).")
        if len(pattern) != self.n_layers:
            raise TrainrigError("model.layer_pattern", f"has {len(pattern)} symbols but n_layers is {self.n_layers};"
                                " each layer is one symbol.")
        if ("E" in pattern) != self.is_moe:
            raise TrainrigError("model.layer_pattern", "has E layers but n_experts is 0." if "E" in pattern
                                else "has no E layer for the model's experts.")
        if self.n_dense_layers:
            raise TrainrigError("model.n_dense_layers", "does not apply with a layer_pattern, which places the"
                                " MLP and MoE layers itself.")
        if "M" in pattern and self.mamba_heads is None and 2 * self.hidden % self.mamba_head_dim:
            raise TrainrigError("model.mamba_heads", "is unset and 2 × hidden is not a multiple of mamba_head_dim.")
        if "M" in pattern and self.mamba_heads_count % self.mamba_groups:
            raise TrainrigError("model.mamba_groups", f"must divide the {self.mamba_heads_count} Mamba heads.")

    def _check_latent_attention(self) -> None:
        """MLA's fields come together: a latent, its rotary part inside an explicit head width."""
        if not self.is_mla:
            for name in ("q_lora_rank", "qk_rope_head_dim"):
                if getattr(self, name) is not None:
                    raise TrainrigError(f"model.{name}", "applies to multi-head latent attention only;"
                                        " set kv_lora_rank.")
            return
        if self.qk_rope_head_dim is None or self.head_dim is None:
            missing = "qk_rope_head_dim" if self.qk_rope_head_dim is None else "head_dim"
            raise TrainrigError(f"model.{missing}", "multi-head latent attention needs head_dim (the whole query/key"
                                " head) and qk_rope_head_dim (its rotary part).")
        if self.qk_rope_head_dim >= self.head_dim:
            raise TrainrigError("model.qk_rope_head_dim",
                                f"must be below head_dim ({self.head_dim}), which includes it.")
        if self.n_kv_heads not in (None, self.n_heads):
            raise TrainrigError("model.n_kv_heads", "multi-head latent attention gives every head its own key and"
                                f" value; leave n_kv_heads unset or {self.n_heads}.")

    # ---- derived shape -------------------------------------------------------------------------

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def head_width(self) -> int:
        """Query/key width of one head."""
        return self.head_dim or self.hidden // self.n_heads

    @property
    def value_head_width(self) -> int:
        """Value (and attention-output) width of one head."""
        return self.v_head_dim or self.head_width

    @property
    def windowed_layer_share(self) -> float:
        """Share of the layers that attend within `sliding_window` (0 without one)."""
        if self.sliding_window is None:
            return 0.0
        return 1.0 - (self.full_attention_layers or 0) / self.n_layers

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def rope_head_width(self) -> int:
        """Width of each query/key head that rotary embeddings turn: all of it, or MLA's rotary part."""
        return self.qk_rope_head_dim if self.is_mla else self.head_width

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def is_hybrid(self) -> bool:
        """Layers given one block each by `layer_pattern` (else attention + MLP per layer)."""
        return self.layer_pattern is not None

    @property
    def n_moe_layers(self) -> int:
        if self.is_hybrid:
            return self.layer_pattern.count("E")
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    @property
    def n_attention_layers(self) -> int:
        """Layers with self-attention: all of them, or a pattern's `*`."""
        return self.layer_pattern.count("*") if self.is_hybrid else self.n_layers

    @property
    def n_mamba_layers(self) -> int:
        """A pattern's Mamba-2 mixers (`M`)."""
        return self.layer_pattern.count("M") if self.is_hybrid else 0

    @property
    def n_dense_mlp_layers(self) -> int:
        """Layers with a dense MLP: those without MoE, or a pattern's `-`."""
        return self.layer_pattern.count("-") if self.is_hybrid else self.n_layers - self.n_moe_layers

    @property
    def n_blocks(self) -> int:
        """Pre-norm residual blocks: two per transformer layer (attention, MLP), one per pattern symbol."""
        return self.n_layers if self.is_hybrid else 2 * self.n_layers

    @property
    def mamba_heads_count(self) -> int:
        return self.mamba_heads or 2 * self.hidden // self.mamba_head_dim

    @property
    def mamba_inner(self) -> int:
        """Mamba-2 inner width d_inner = heads × head width (2 × hidden when heads are unset)."""
        return self.mamba_heads * self.mamba_head_dim if self.mamba_heads else 2 * self.hidden

    @property
    def mamba_bc_width(self) -> int:
        """Width of B and C together: 2 × groups × state size."""
        return 2 * self.mamba_groups * self.mamba_state_dim

    @property
    def mamba_in_proj_width(self) -> int:
        """Outputs of a Mamba-2 mixer's input projection: z and x (d_inner each), B and C, and one dt
        per head (Dao & Gu 2024 §7.1; Megatron-Core MambaMixer.in_proj)."""
        return 2 * self.mamba_inner + self.mamba_bc_width + self.mamba_heads_count

    @property
    def mamba_params_per_layer(self) -> int:
        """One Mamba-2 mixer: in and out projections, the depthwise convolution (weights and bias)
        over x, B and C, A, D and dt's bias per head, and the gated RMSNorm over d_inner (Megatron-Core
        MambaMixer; Nemotron-H's Hugging Face modeling code). Its pre-norm is counted with the norms."""
        conv = (self.mamba_inner + self.mamba_bc_width) * (self.mamba_conv_kernel + 1)
        projections = self.hidden * self.mamba_in_proj_width + self.mamba_inner * self.hidden
        return projections + conv + 3 * self.mamba_heads_count + self.mamba_inner

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
        """Q, K, V and output projections (GQA shrinks K and V; MLA projects through its latents and
        normalizes them), plus biases where present."""
        q_width = self.n_heads * self.head_width
        if self.is_mla:
            projections = self.mla_projections
        else:
            kv_heads = self.kv_heads
            projections = [(self.hidden, q_width), (self.hidden, kv_heads * self.head_width),
                           (self.hidden, kv_heads * self.value_head_width)]
        weights = sum(fan_in * fan_out for fan_in, fan_out in projections)
        output = self.n_heads * self.value_head_width * self.hidden
        bias = {"none": 0, "qkv": sum(out for _, out in projections)}
        bias["all"] = bias["qkv"] + self.hidden
        return weights + output + bias[self.bias] + self.latent_norm_params

    @property
    def mla_projections(self) -> list[tuple[int, int]]:
        """(fan_in, fan_out) of MLA's query and key/value linears in forward order (DeepSeek-V2
        §2.1.2–2.1.3, eq. 9–19): the query down and up projections (or one from the hidden state),
        the key/value down projection to the latent plus the shared rotary key, and the up
        projection to every head's non-rotary key and value. The first of each pair is a down
        projection: replicated across tensor-parallel ranks (Megatron-Core `parallel_mode
        'duplicated'`, torchtitan's NoParallel `wq_a`/`wkv_a`), the rest split by heads."""
        heads, rope = self.n_heads, self.qk_rope_head_dim or 0
        q_width = heads * self.head_width
        query = [(self.hidden, self.q_lora_rank), (self.q_lora_rank, q_width)] if self.q_lora_rank else [
            (self.hidden, q_width)]
        key_value = [(self.hidden, self.kv_lora_rank + rope),
                     (self.kv_lora_rank, heads * (self.head_width - rope + self.value_head_width))]
        return [*query, *key_value]

    @property
    def latent_norm_params(self) -> int:
        """MLA's norms of its query and key/value latents (a scale; and a bias for LayerNorm)."""
        if not self.is_mla:
            return 0
        return ((self.q_lora_rank or 0) + self.kv_lora_rank) * (2 if self.norm == "layernorm" else 1)

    @property
    def attention_replicated_params_per_layer(self) -> int:
        """Attention parameters every tensor-parallel rank holds whole: MLA's down projections (with
        their biases) and latent norms; none for ordinary attention."""
        if not self.is_mla:
            return 0
        down_widths = (self.q_lora_rank or 0) + self.kv_lora_rank + self.qk_rope_head_dim
        biases = down_widths if self.bias != "none" else 0
        return self.hidden * down_widths + biases + self.latent_norm_params

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
        """All block parameters (every layer, its norms included)."""
        norms = self.norm_params * self.n_blocks
        attention = self.attention_params_per_layer * self.n_attention_layers
        mamba = self.mamba_params_per_layer * self.n_mamba_layers
        mlp = self.n_dense_mlp_layers * self.mlp_params(self.ffn_hidden)
        mlp += self.n_moe_layers * self.moe_mlp_params_per_layer
        return norms + attention + mamba + mlp

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
