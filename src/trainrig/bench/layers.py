"""The torch modules of the bench decoder. This is the one bench module that imports torch at the
top: it is imported only from inside functions of `trainrig.bench.model`, after torch is known to
be installed."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

ROPE_BASE = 10_000.0


class LoraLinear(nn.Module):
    """A frozen base linear plus a trainable low-rank update: y = base(x) + (alpha / r) · B(A(x))."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features))
        # B starts at zero so the adapted model starts equal to the base (Hu et al. 2021)
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
        self.scale = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale


E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def _to_fp8(t: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Tensorwise dynamic scaling: the tensor's absolute maximum maps to the format's largest value;
    (the fp8 tensor, the fp32 scale that multiplies it back)."""
    largest = torch.finfo(dtype).max
    scale = (t.detach().abs().amax().float() / largest).clamp(min=1e-12)
    return (t / scale).clamp(-largest, largest).to(dtype), scale


def _column_major(t: torch.Tensor) -> torch.Tensor:
    """The same matrix stored column by column: the layout `torch._scaled_mm` takes as its second operand."""
    return t.t().contiguous().t()


class _Fp8Matmul(torch.autograd.Function):
    """y = x · Wᵀ with both operands in e4m3; in the backward the output's gradient in e5m2 (its wider
    range) times the saved e4m3 operands: the tensorwise recipe of torchao's float8 training, every
    GEMM of a linear through `torch._scaled_mm`. The fp8 copies are what the backward keeps."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
        x8, x_scale = _to_fp8(x, E4M3)
        w8, w_scale = _to_fp8(weight, E4M3)
        ctx.save_for_backward(x8, x_scale, w8, w_scale)
        ctx.out_dtype, ctx.weight_dtype = out_dtype, weight.dtype
        return torch._scaled_mm(x8, _column_major(w8.t()), scale_a=x_scale, scale_b=w_scale, out_dtype=out_dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        x8, x_scale, w8, w_scale = ctx.saved_tensors
        g8, g_scale = _to_fp8(grad, E5M2)
        grad_x = torch._scaled_mm(g8, _column_major(w8), scale_a=g_scale, scale_b=w_scale, out_dtype=ctx.out_dtype)
        grad_w = torch._scaled_mm(g8.t().contiguous(), _column_major(x8), scale_a=g_scale, scale_b=x_scale,
                                  out_dtype=torch.float32)
        return grad_x, grad_w.to(ctx.weight_dtype), None


class Fp8Linear(nn.Module):
    """A linear whose three GEMMs (forward, input gradient, weight gradient) run in fp8; the weight
    stays in its own precision (the fp32 master copy) and the bias is added in the output's."""

    def __init__(self, base: nn.Linear) -> None:
        super().__init__()
        self.weight, self.bias = base.weight, base.bias
        self.in_features, self.out_features = base.in_features, base.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        device = x.device.type
        out_dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype
        flat = x.reshape(-1, x.shape[-1])
        y = _Fp8Matmul.apply(flat, self.weight, out_dtype).view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias.to(out_dtype)


def norm_layer(kind: str, width: int) -> nn.Module:
    return nn.RMSNorm(width, eps=1e-5) if kind == "rmsnorm" else nn.LayerNorm(width, eps=1e-5)


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate half of each head's channels by position (the Llama/NeoX layout)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rotary_tables(seq_len: int, head_dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    half = head_dim // 2
    freqs = ROPE_BASE ** (-torch.arange(half, device=device, dtype=torch.float32) / half)
    angles = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), freqs)
    return angles.cos(), angles.sin()


class Attention(nn.Module):
    """Multi-head, grouped-query or multi-query attention; values `value_dim` wide per head."""

    def __init__(self, hidden: int, n_heads: int, kv_heads: int, head_dim: int, value_dim: int, bias: str,
                 rope: bool) -> None:
        super().__init__()
        qkv_bias, out_bias = bias in ("qkv", "all"), bias == "all"
        self.q = nn.Linear(hidden, n_heads * head_dim, bias=qkv_bias)
        self.k = nn.Linear(hidden, kv_heads * head_dim, bias=qkv_bias)
        self.v = nn.Linear(hidden, kv_heads * value_dim, bias=qkv_bias)
        self.o = nn.Linear(n_heads * value_dim, hidden, bias=out_bias)
        self.n_heads, self.kv_heads, self.rope = n_heads, kv_heads, rope
        self.head_dim, self.value_dim = head_dim, value_dim

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q = self.q(x).view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(batch, seq, self.kv_heads, self.value_dim).transpose(1, 2)
        if self.rope:
            q, k = rotary(q, cos, sin).to(v.dtype), rotary(k, cos, sin).to(v.dtype)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.n_heads)
        return self.o(out.transpose(1, 2).reshape(batch, seq, self.n_heads * self.value_dim))


class LatentAttention(nn.Module):
    """Multi-head latent attention (MLA; DeepSeek-V2 §2.1, eq. 9–19). Queries come from a low-rank
    latent (down, norm, up) or straight from the hidden state; keys and values from one shared
    latent: a down projection writes it and a rotary key shared by every head, an up projection
    reads it back into each head's non-rotary key and its value. Rotary turns the last
    `rope_width` channels of each query and the shared key (NeoX layout, as `Attention`)."""

    def __init__(self, hidden: int, n_heads: int, head_dim: int, value_dim: int, rope_width: int, kv_rank: int,
                 q_rank: int | None, norm: str, bias: str, rope: bool) -> None:
        super().__init__()
        qkv_bias = bias in ("qkv", "all")  # as ModelSpec counts them: on every query and key/value linear
        self.q_down = nn.Linear(hidden, q_rank, bias=qkv_bias) if q_rank else None
        self.q_norm = norm_layer(norm, q_rank) if q_rank else None
        self.q = nn.Linear(q_rank or hidden, n_heads * head_dim, bias=qkv_bias)
        self.kv_down = nn.Linear(hidden, kv_rank + rope_width, bias=qkv_bias)
        self.kv_norm = norm_layer(norm, kv_rank)
        self.kv_up = nn.Linear(kv_rank, n_heads * (head_dim - rope_width + value_dim), bias=qkv_bias)
        self.o = nn.Linear(n_heads * value_dim, hidden, bias=bias == "all")
        self.n_heads, self.head_dim, self.value_dim, self.rope = n_heads, head_dim, value_dim, rope
        self.rope_width, self.kv_rank = rope_width, kv_rank

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        heads, plain_width = self.n_heads, self.head_dim - self.rope_width
        q = self.q(x if self.q_down is None else self.q_norm(self.q_down(x)))
        q = q.view(batch, seq, heads, self.head_dim).transpose(1, 2)
        latent, k_rope = self.kv_down(x).split([self.kv_rank, self.rope_width], dim=-1)
        k_plain, v = self.kv_up(self.kv_norm(latent)).view(batch, seq, heads, plain_width + self.value_dim) \
            .transpose(1, 2).split([plain_width, self.value_dim], dim=-1)
        k_rope = k_rope.unsqueeze(1)  # one rotary key for all heads: (batch, 1, seq, rope_width)
        if self.rope:
            q_plain, q_rope = q.split([plain_width, self.rope_width], dim=-1)
            q = torch.cat((q_plain, rotary(q_rope, cos, sin).to(v.dtype)), dim=-1)
            k_rope = rotary(k_rope, cos, sin).to(v.dtype)
        k = torch.cat((k_plain, k_rope.expand(-1, heads, -1, -1)), dim=-1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # v narrower than q and k: SDPA allows it
        return self.o(out.transpose(1, 2).reshape(batch, seq, heads * self.value_dim))


class Mlp(nn.Module):
    """SwiGLU (gate, up, down) when gated, else up → GeLU → down."""

    def __init__(self, hidden: int, ffn: int, gated: bool, bias: bool) -> None:
        super().__init__()
        self.gate = nn.Linear(hidden, ffn, bias=bias) if gated else None
        self.up = nn.Linear(hidden, ffn, bias=bias)
        self.down = nn.Linear(ffn, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate is None:
            return self.down(F.gelu(self.up(x), approximate="tanh"))
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoeMlp(nn.Module):
    """A mixture-of-experts MLP: a linear router picks each token's top-k routed experts (softmax over
    all experts, the k chosen weights renormalized to sum to one, as Mixtral does), and shared experts
    (DeepSeek/Qwen-MoE) see every token. Dropless: every routed token is computed.

    The experts run one after another on the tokens routed to each, as Hugging Face transformers'
    Mixtral block does; frameworks with grouped GEMMs (Megatron, torchtitan) run them faster. There is
    no auxiliary load-balancing loss: its cost is one small reduction per layer."""

    def __init__(self, hidden: int, experts: list[Mlp], shared: list[Mlp], top_k: int) -> None:
        super().__init__()
        self.router = nn.Linear(hidden, len(experts), bias=False)
        self.experts, self.shared = nn.ModuleList(experts), nn.ModuleList(shared)
        self.top_k = top_k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.reshape(-1, x.shape[-1])
        # routing in fp32: bf16 softmax ties and rounding would change which experts win
        probabilities = F.softmax(self.router(tokens).float(), dim=-1)
        weights, chosen = probabilities.topk(self.top_k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(tokens.dtype)
        out = torch.zeros_like(tokens)
        for index, expert in enumerate(self.experts):
            token, slot = (chosen == index).nonzero(as_tuple=True)
            if token.numel():  # an expert no token chose does no work (and gets no gradient)
                out = out.index_add(0, token, expert(tokens[token]) * weights[token, slot, None])
        for expert in self.shared:
            out = out + expert(tokens)
        return out.view_as(x)


class Block(nn.Module):
    def __init__(self, attention: Attention | LatentAttention, mlp: Mlp | MoeMlp, norm: str, hidden: int,
                 dropout: float) -> None:
        super().__init__()
        self.attn_norm, self.attn = norm_layer(norm, hidden), attention
        self.mlp_norm, self.mlp = norm_layer(norm, hidden), mlp
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.attn_norm(x), cos, sin))
        return x + self.drop(self.mlp(self.mlp_norm(x)))


class Decoder(nn.Module):
    """Embedding (+ learned positions), pre-norm blocks, final norm, LM head (tied or not). The
    rotary tables are `rope_width` wide: each head's whole query/key, or MLA's rotary part."""

    def __init__(self, embed: nn.Embedding, positions: nn.Embedding | None, blocks: list[Block], final_norm: nn.Module,
                 head: nn.Linear | None, rope_width: int, rope: bool, recompute: bool) -> None:
        super().__init__()
        self.embed, self.positions = embed, positions
        self.blocks = nn.ModuleList(blocks)
        self.final_norm, self.head = final_norm, head
        self.rope_width, self.rope, self.recompute = rope_width, rope, recompute

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        x = self.embed(tokens)
        if self.positions is not None:
            x = x + self.positions(torch.arange(seq, device=tokens.device))
        cos, sin = rotary_tables(seq, self.rope_width, tokens.device) if self.rope else (x.new_empty(0),) * 2
        for block in self.blocks:
            if self.recompute and torch.is_grad_enabled():
                # full recompute: only each block's input is kept; the block reruns in backward
                x = checkpoint(block, x, cos, sin, use_reentrant=False)
            else:
                x = block(x, cos, sin)
        x = self.final_norm(x)
        return F.linear(x, self.embed.weight) if self.head is None else self.head(x)
