"""GPU time of the arithmetic: GEMMs from the dense peak and their shapes, attention, and the
memory-bound elementwise work from HBM bandwidth. Vectorized over `Inputs` fields.

GEMM model. A GEMM's output is cut into tiles, one tile per compute unit (SM/CU) at a time; the
last wave leaves units idle and edge tiles compute padding (wave and tile quantization, NVIDIA
"Matrix Multiplication Background" user guide). Like cuBLAS's heuristics we take the best of a few
tile shapes; smaller tiles reuse fewer operands per FLOP and run proportionally slower when their
arithmetic intensity is under `tile_saturation_intensity`. The best shape reaches the measured
MAMF fraction of peak (`matmul_efficiency`). A GEMM is never faster than streaming its operands
through HBM once.
"""

from __future__ import annotations

import numpy as np

from trainrig.estimate import mamba, ops
from trainrig.estimate.inputs import Inputs
from trainrig.estimate.params import ModelParameters

__all__ = ["gemm_time_s", "tile_efficiency", "attention_time_s", "flash_forward_flops", "elementwise_bytes_per_token",
           "attention_key_ramp", "ATTENTION_REFERENCE_KEYS",
           "eager_softmax", "eager_elementwise_scale", "GemmBatch",
           "linear_time_s"]

# (rows, cols) of output tiles cuBLAS/CUTLASS commonly pick from for 16-bit GEMMs.
TILE_SHAPES = ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64))
_TILE_ROWS = np.array([r for r, _ in TILE_SHAPES], dtype=float)
_TILE_COLS = np.array([c for _, c in TILE_SHAPES], dtype=float)
_TILE_AREAS = _TILE_ROWS * _TILE_COLS
# a tile's multiply-adds per operand element it loads
_TILE_FEED_INTENSITIES = _TILE_ROWS * _TILE_COLS / (_TILE_ROWS + _TILE_COLS)


def tile_efficiency(m, n, units, saturation_intensity, batch=1.0):
    """Useful fraction of the matrix units' time for an m×n output (best tile shape).

    Evaluated for every tile shape at once along a trailing axis, then the best is taken.
    """
    m, n, batch = (np.asarray(v, dtype=float)[..., None] for v in (m, n, batch))
    if type(units) is np.ndarray:  # a single count broadcasts as it is
        units = units[..., None]
    tiles = batch * np.ceil(m / _TILE_ROWS) * np.ceil(n / _TILE_COLS)
    waves = np.ceil(tiles / units)
    # waves·units·rows·cols: whole numbers, exact in any order, so one product with the tile areas
    useful = (batch * m * n) / (waves * units * _TILE_AREAS)
    feed = np.minimum(1.0, _TILE_FEED_INTENSITIES / saturation_intensity)
    return (useful * feed).max(axis=-1)


def gemm_time_s(m, n, k, x: Inputs, p: ModelParameters, batch=1.0, element_bytes=2.0, peak=None, efficiency=None):
    """One (batched) GEMM C[m,n] = A[m,k]·B[k,n]: the slower of arithmetic and operand traffic.
    `peak` and `efficiency` (best-shape fraction of it) default to the training precision's."""
    peak_tflops = x.gemm_peak_tflops if peak is None else peak
    flops = 2.0 * batch * m * n * k
    depth = k / (k + p.gemm_k_overhead)
    tiles = tile_efficiency(m, n, x.compute_units, p.tile_saturation_intensity, batch)
    efficiency = (x.matmul_efficiency if efficiency is None else efficiency) * tiles * depth
    arithmetic = flops / (peak_tflops * 1e12 * efficiency)
    traffic = element_bytes * batch * (m * k + k * n + m * n) / (x.hbm_bandwidth_gbs * 1e9)
    return np.maximum(arithmetic, traffic)


class GemmBatch:
    """GEMM shapes collected first and timed together in one vectorized `gemm_time_s` call.

    A layer has a dozen GEMMs (three per linear: forward, input gradient, weight gradient); timing
    them along one extra leading axis costs about what one GEMM costs.
    """

    def __init__(self) -> None:
        self._shapes: list[tuple] = []
        self._head: list[int] = []  # GEMMs at the output head's precision (`head_gemm_peak_tflops`)
        self._any_array = False  # whether some shape varies over configurations (an array)

    def add(self, m, n, k, batch=1.0) -> int:
        self._shapes.append((m, n, k, batch))
        self._any_array = self._any_array or np.ndarray in (type(m), type(n), type(k), type(batch))
        return len(self._shapes) - 1

    def linear(self, tokens, fan_in, fan_out, head: bool = False) -> tuple[int, int, int]:
        """y = x·W over `tokens` rows: forward, input gradient (tokens × fan_in), and weight
        gradient (fan_in × fan_out reduced over tokens), each as many FLOPs as the forward.
        `head`: the output projection, which fp8 recipes keep in bf16."""
        gemms = (self.add(tokens, fan_out, fan_in), self.add(tokens, fan_in, fan_out),
                 self.add(fan_in, fan_out, tokens))
        if head:
            self._head.extend(gemms)
        return gemms

    def run(self, x: Inputs, p: ModelParameters) -> list:
        """Each GEMM's time, in the order added: a float or an array over configurations."""
        stacked, trailing = self._stacked(x)
        peak = efficiency = None
        if self._head and not (ops.all(x.head_gemm_peak_tflops == x.gemm_peak_tflops)
                               and ops.all(x.head_matmul_efficiency == x.matmul_efficiency)):
            head = np.zeros((len(self._shapes),) + (1,) * trailing, dtype=bool)
            head[self._head] = True
            peak = np.where(head, x.head_gemm_peak_tflops, x.gemm_peak_tflops)
            efficiency = np.where(head, x.head_matmul_efficiency, x.matmul_efficiency)
        return list(gemm_time_s(stacked[0], stacked[1], stacked[2], x, p, batch=stacked[3], peak=peak,
                                efficiency=efficiency))

    def _stacked(self, x: Inputs) -> tuple[np.ndarray, int]:
        """(m, n, k, batch) of every GEMM along a new axis 1, and the number of trailing axes the
        configurations take (broadcast against the GEMM's per-configuration rates)."""
        rate_shape = np.shape(x.gemm_peak_tflops)
        if not self._any_array:
            # one configuration's shapes (the estimate path): one conversion, broadcast later
            stacked = np.array(self._shapes, dtype=float).T
            return stacked.reshape(stacked.shape + (1,) * len(rate_shape)), len(rate_shape)
        shapes = {v.shape for shape in self._shapes for v in shape if isinstance(v, np.ndarray)}
        common = np.broadcast_shapes(*shapes, rate_shape)
        stacked = np.empty((4, len(self._shapes), *common))
        for g, shape in enumerate(self._shapes):
            for i in range(4):
                stacked[i, g] = shape[i]  # assignment broadcasts scalars and arrays alike
        return stacked, len(common)


def linear_time_s(tokens, fan_in, fan_out, x: Inputs, p: ModelParameters, weight_grads=True):
    """Forward and backward time of one linear layer on its own (see GemmBatch.linear)."""
    batch = GemmBatch()
    forward, input_grad, weight_grad = batch.linear(tokens, fan_in, fan_out)
    t = batch.run(x, p)
    return t[forward], t[input_grad] + ops.where(weight_grads, t[weight_grad], 0.0)


# Keys per tile of a block-sparse attention kernel: FlexAttention's default BLOCK_SIZE (128,
# torch.nn.attention.flex_attention.create_block_mask), the size of FlashAttention-2's key blocks.
ATTENTION_KEY_TILE = 128.0


def fused_attention_keys(x: Inputs):
    """Keys a fused attention kernel computes per query, with fully masked tiles skipped: causal ≈
    half the sequence. A sliding window w shorter than the sequence s: a query at position p sees
    min(p, w) keys, w − w²/(2s) on average, and the tiles the window's edge cuts are computed whole,
    one more key tile per query block (a 128-key window touches two tiles). Packed samples that
    attend only within themselves (`packed_sample_len` l, document masking): a query sees (l + 1)/2
    keys of its own sample on average, and the tiles a sample boundary cuts are computed whole,
    about one more key tile per query (for short samples, the tile holding the query and the one
    before it)."""
    keys = ops.minimum(x.seq_len, x.context_len_cap)
    window_seen = keys - keys * keys / (2 * x.seq_len) + ATTENTION_KEY_TILE
    windowed = ops.where(x.context_len_cap < x.seq_len, window_seen, (keys + 1) / 2)
    seen = x.windowed_share * windowed + (1 - x.windowed_share) * (x.seq_len + 1) / 2  # over the layers
    return ops.minimum(seen, (x.packed_sample_len + 1) / 2 + ATTENTION_KEY_TILE)


def flash_forward_flops(tokens_q, heads, x: Inputs):
    """FLOPs a flash-attention forward executes: QKᵀ and attention·V over the keys each query
    sees (`fused_attention_keys`), at the query/key and value head widths."""
    return 2 * tokens_q * fused_attention_keys(x) * heads * (x.head_dim + x.v_head_dim)


def eager_elementwise_scale(x: Inputs, p: ModelParameters):
    """Kernels and bytes of the elementwise work relative to fused kernels: 1, or
    `eager_elementwise_factor` where it runs as eager PyTorch ops."""
    return ops.where(x.fused_kernels > 0, 1.0, p.eager_elementwise_factor)


def attention_key_ramp(x: Inputs, p: ModelParameters):
    """A fused kernel's rate at the keys each query block sees per call, relative to its rate at
    ATTENTION_REFERENCE_KEYS (where `attention_efficiency` is measured): k / (k + overhead), the
    per-block fixed work (loading Q, writing O and the log-sum-exp, the masked diagonal block) over
    the key blocks it streams (`attention_key_overhead`). Causal queries see (s+1)/2 keys on average;
    a context-parallel ring calls the kernel once per K/V chunk of s/cp keys (Ulysses: whole sequence);
    document-masked packed samples, their own (`fused_attention_keys`)."""
    keys = x.attended_keys
    seen = fused_attention_keys(x)
    seen = ops.where((x.cp > 1) & (x.cp_kind != 2), ops.minimum(seen, keys / x.cp), seen)
    overhead = p.attention_key_overhead
    return (seen / (seen + overhead)) / (ATTENTION_REFERENCE_KEYS / (ATTENTION_REFERENCE_KEYS + overhead))


# Sequence length of the attention measurements the catalog's `attention_efficiency` comes from
# (Dao 2023 §4.1 and Shah et al. 2024 §4.1: the "up to" rates are at 16k, head dim 128).
ATTENTION_REFERENCE_KEYS = 16384.0


def attention_time_s(tokens_q, heads, x: Inputs, p: ModelParameters):
    """Forward and backward time of the attention core for one micro-batch on one GPU.

    Flash attention: executed FLOPs skip fully masked blocks (causal ≈ half) and the backward
    recomputes the scores (5 GEMMs vs the forward's 2: Dao 2023 §3.1.2); the kernel reaches the
    GPU's measured FlashAttention-2-class `attention_efficiency` of peak, over waves of 128-query
    blocks per head, times the kernel's measured forward and backward speed relative to
    FlashAttention-2 on that architecture (`attention_fwd_speed`, `attention_bwd_speed`: cuDNN and
    FlashAttention-3 on Hopper) and the sequence-length ramp (`attention_key_ramp`).
    FlashAttention-1-class kernels run at `flash1_relative_speed` of FlashAttention-2, whatever the
    head width: their shortfall is work partitioning and non-matmul work (Dao 2023 §3), not the
    GEMM depth. Without it, QKᵀ and attention·V are batched GEMMs over full s×s scores (the
    softmax and its masks are memory-bound work, counted in `elementwise_bytes_per_token`).
    """
    keys = x.attended_keys
    batch_heads = x.micro_batch * heads
    # flash: one block of 128 queries per unit at a time
    blocks = batch_heads * ops.ceil(tokens_q / x.micro_batch / 128)
    waves = ops.ceil(blocks / x.compute_units)
    occupancy = blocks / (waves * x.compute_units)
    # the GPU's measurement is for head dim 128; QKᵀ's reduction depth is the head dim, which the
    # kernels instantiate in steps of 32 (flash-attn csrc: hdim 32, 64, 96 … 256; a head of 80
    # computes 96), and a narrower head does the per-block softmax work over fewer FLOPs:
    # K/(K + attention_head_dim_overhead) relative to 128's
    padded = ops.ceil(x.head_dim / 32) * 32
    k0 = p.attention_head_dim_overhead
    depth = (x.head_dim / padded) * (padded / (padded + k0)) / (128 / (128 + k0))
    kernel = ops.where(x.flash_attention_version < 2, p.flash1_relative_speed, depth)
    ramp = attention_key_ramp(x, p) if p.attention_key_overhead > 0 else 1.0
    rate = x.attention_peak_tflops * 1e12 * x.attention_efficiency * occupancy * kernel * ramp
    flops = flash_forward_flops(tokens_q, heads, x)
    flash_forward = flops / (rate * x.attention_fwd_speed)
    flash_backward = 2.5 * flops / (rate * x.attention_bwd_speed)
    flash = x.flash_attention > 0
    if ops.all(flash):  # the unfused GEMMs below would be computed only to be discarded
        return flash_forward, flash_backward
    # unfused: two batched GEMMs forward, four backward
    queries = tokens_q / x.micro_batch
    scores = gemm_time_s(queries, keys, x.head_dim, x, p, batch=batch_heads, peak=x.attention_peak_tflops)
    values = gemm_time_s(queries, x.v_head_dim, keys, x, p, batch=batch_heads, peak=x.attention_peak_tflops)
    unfused_forward = scores + values
    unfused_backward = 2 * unfused_forward
    return ops.where(flash, flash_forward, unfused_forward), ops.where(flash, flash_backward, unfused_backward)


# Bytes per score element of an eager fp32 softmax: upcast (read 2, write 4), scale (4, 4), causal
# masked_fill (4 + 1 mask, 4), softmax (4, 4), downcast (4, 2) — against 2 + 2 for the fused kernel.
EAGER_SOFTMAX_BYTES_PER_SCORE = 37.0
# Megatron's fused causal softmax (scaled_upper_triang_masked_softmax) takes batches of 4 score
# matrices: it runs only when micro_batch · heads_per_gpu is a multiple of 4, else Megatron falls back
# to eager PyTorch (FusedScaleMaskSoftmax.is_kernel_available / forward_torch_softmax in Megatron-LM
# and Megatron-DeepSpeed megatron/model/fused_softmax.py). Its sequence-length limit (2048 to 16384
# depending on the version) is not modelled.
FUSED_SOFTMAX_BATCH = 4


def eager_softmax(x: Inputs):
    """1 where the unfused attention's softmax runs as eager PyTorch ops, else 0."""
    score_matrices = x.micro_batch * x.n_heads / x.tp
    unfusable = score_matrices % FUSED_SOFTMAX_BATCH != 0
    return ops.where((x.flash_attention == 0) & ((x.fused_kernels == 0) | unfusable), 1.0, 0.0)


def elementwise_bytes_per_token(x: Inputs, p: ModelParameters):
    """HBM bytes the forward's memory-bound kernels move per token on one GPU (backward ≈ 2×).

    Per layer: two norms (read+write h), two residual adds (read 2h, write h), rotary on q and k,
    the MLP activation (read the gate/up outputs, write the product), MoE token permutation, and
    without flash attention the softmax over the s×s scores (read+write, plus dropout mask/output;
    an eager fp32 softmax moves EAGER_SOFTMAX_BYTES_PER_SCORE instead).
    """
    e = x.activation_bytes
    replicated_div = x.sequence_shards
    norms_and_residuals = 10 * x.hidden / replicated_div
    rotary = 2 * (x.n_heads + x.kv_heads) * x.head_dim * x.rope / x.tp
    if ops.any(x.mla > 0):
        norms_and_residuals = norms_and_residuals + x.mla * _mla_elementwise_per_token(x)
        # MLA turns the rotary part of every query head and one shared key
        mla_rotary = 2 * (x.n_heads / x.tp + 1) * x.rope_head_dim * x.rope
        rotary = ops.where(x.mla > 0, mla_rotary, rotary)
    dense_act = x.mlp_matrices * x.ffn_hidden / x.tp
    moe_act = x.mlp_matrices * (x.top_k * x.expert_ffn_hidden + x.n_shared_experts * x.shared_ffn_hidden) / x.tp
    moe_permute = 4 * x.top_k * x.hidden
    dense_layers = x.n_dense_mlp_layers
    keys = x.attended_keys
    scores = (1 - x.flash_attention) * x.n_heads / x.tp * keys
    softmax_bytes = scores * ops.where(eager_softmax(x) > 0, EAGER_SOFTMAX_BYTES_PER_SCORE, 2 * e)
    attention_dropout = scores * 3 * x.dropout  # mask and output
    eager = eager_elementwise_scale(x, p)
    per_layer = eager * (norms_and_residuals + rotary) + attention_dropout
    total = x.n_layers * per_layer + eager * (dense_layers * dense_act + x.n_moe_layers * moe_act)
    total = total + x.n_moe_layers * moe_permute
    # fp8: each linear layer's input is cast before its GEMM, `fp8_cast_bytes` per element by recipe
    # (job_fields.FP8_CAST_BYTES; Micikevicius et al. 2022); the output head stays in bf16
    linear_inputs = 2 * x.hidden + x.n_heads * x.v_head_dim + x.ffn_hidden + x.mla * (x.q_lora_rank + x.kv_lora_rank)
    fp8_casts = x.fp8 * x.fp8_cast_bytes * x.n_layers * linear_inputs / x.tp
    layers = e * total + fp8_casts + x.n_layers * softmax_bytes + x.n_layers * adapter_bytes_per_token(x)
    if not ops.any(x.hybrid > 0):
        return layers
    # a hybrid: one norm and residual add per block, the attention terms in its attention layers,
    # the MLP's in its MLP layers, and the Mamba-2 mixers' own (mamba.py; Triton kernels, never eager)
    blocks = eager * 5 * x.blocks_per_layer * x.hidden / replicated_div * x.n_layers
    attention = x.n_attention_layers * (e * (eager * rotary + attention_dropout) + softmax_bytes)
    mlps = e * (eager * (dense_layers * dense_act + x.n_moe_layers * moe_act) + x.n_moe_layers * moe_permute)
    mixers = x.n_mamba_layers * mamba.elementwise_bytes_per_token(x, e)
    hybrid_inputs = (x.n_attention_layers * (x.hidden + x.n_heads * x.v_head_dim)
                     + (dense_layers + x.n_moe_layers) * (x.hidden + x.ffn_hidden)
                     + x.n_mamba_layers * (x.hidden + x.mamba_inner))
    casts = x.fp8 * x.fp8_cast_bytes * hybrid_inputs / x.tp
    hybrid = e * blocks + attention + mlps + mixers + casts + x.n_layers * adapter_bytes_per_token(x)
    return ops.where(x.hybrid > 0, hybrid, layers)


def _mla_elementwise_per_token(x: Inputs):
    """Elements MLA's extra memory-bound kernels read and write per token and layer on one GPU: the
    norms of its query and key/value latents (read and write each, on the down projections'
    tokens) and the concatenations that assemble every head's query and key from its rotary and
    non-rotary parts (read and write both)."""
    latent_norms = 2 * (x.q_lora_rank + x.kv_lora_rank) * x.mla_down_tokens_share
    assembled = 2 * (x.q_width_local + x.kv_width_local)
    return latent_norms + assembled


def adapter_bytes_per_token(x: Inputs):
    """HBM bytes one layer's LoRA branches move per token in the forward: each adapted linear reads
    its input again for A (after dropout on the input, which reads it and writes a copy and a 1-byte
    mask), writes B's output (dropout there reads it and writes it again with the mask), and adds it
    to the base output (read both, write the sum); A's rank-wide output is negligible. PEFT applies
    each adapter, and its dropout, separately; one on a fused q/k/v (or gate/up) linear reads the
    input once."""
    if not ops.any(x.method > 0):
        return 0.0
    e = x.activation_bytes
    fan_in, fan_out = adapter_widths(x)
    per_token = fan_in * (e + x.lora_dropout * (2 * e + 1)) + fan_out * (4 * e + x.lora_output_dropout * (2 * e + 1))
    return ops.where(x.method > 0, per_token, 0.0)


def adapter_widths(x: Inputs):
    """(inputs, outputs) one layer's adapted linears read and write per token, summed over the
    adapters on this rank's shard: a fused q/k/v (or gate/up) linear's input counted once."""
    q_width, k_width, v_width = x.q_width_local, x.kv_heads * x.head_dim / x.tp, x.kv_heads * x.v_head_dim / x.tp
    first = x.adapted_first_mlp
    attention_in = x.hidden * x.adapted_qkv_linears
    attention_out = q_width * x.lora_q + k_width * x.lora_k + v_width * x.lora_v
    if ops.any(x.mla > 0):
        latent_in, latent_out = x.mla_adapted_widths(x.tp)
        attention_in, attention_out = ops.where(x.mla > 0, latent_in, attention_in), ops.where(
            x.mla > 0, latent_out, attention_out)
    fan_in = (attention_in + x.hidden * x.adapted_mlp_input_linears + x.attention_out_local * x.lora_o
              + x.ffn_hidden / x.tp * x.lora_down)
    fan_out = (attention_out + x.hidden * (x.lora_o + x.lora_down) + x.ffn_hidden / x.tp * first)
    if ops.any(x.hybrid > 0):  # a hybrid's adapters: in its attention and MLP layers only
        a, m = x.attention_share, x.mlp_share
        fan_in = ops.where(x.hybrid > 0, a * (attention_in + x.attention_out_local * x.lora_o) + m * (
            x.hidden * x.adapted_mlp_input_linears + x.ffn_hidden / x.tp * x.lora_down), fan_in)
        fan_out = ops.where(x.hybrid > 0, a * (attention_out + x.hidden * x.lora_o) + m * (
            x.hidden * x.lora_down + x.ffn_hidden / x.tp * first), fan_out)
    return fan_in, fan_out
