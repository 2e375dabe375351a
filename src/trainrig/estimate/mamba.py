"""Mamba-2 mixers of a hybrid model (ModelSpec.layer_pattern `M`): FLOPs, GEMMs, memory-bound
bytes, saved activations and kernels of one mixer, as Megatron-Core's MambaMixer runs it.

A mixer projects the normed hidden state to z, x, B, C and dt (in_proj, split over TP by heads and
groups), runs a causal depthwise convolution over x, B and C, the SSD scan, a gated RMSNorm with z,
and out_proj back to the hidden width (Dao & Gu 2024, "Transformers are SSMs", §7; Megatron-Core
megatron/core/ssm/mamba_mixer.py). The SSD scan over chunks of Q tokens (ibid. §6, mamba_ssm
ops/triton/ssd_combined.py) is four batched matrix products per chunk — C·Bᵀ per group, the
chunk's state Bᵀ·x per head, and the output from the masked scores and from the incoming state —
plus a recurrence that passes each head's N × P state, in fp32, from chunk to chunk.

Training runs mamba_ssm's memory-efficient path (Megatron-Core `use_mamba_mem_eff_path`, the
default), `mamba_split_conv1d_scan_combined`, then Megatron-Core's own RMSNorm and out_proj
(mamba_mixer.py `ssm_training`): the fused function keeps the in_proj output and the scan's output
(ssd_combined.py `ctx.save_for_backward(zxbcdt, …, out_x, …)`), and its backward recomputes the
convolution, C·Bᵀ and the chunk states (`_bmm_chunk_fwd`, `_chunk_state_fwd`, `_state_passing_fwd`
again) before the gradient kernels. All functions take one micro-batch's `tokens` on one GPU and
vectorize over `Inputs`.
"""

from __future__ import annotations

from trainrig.estimate import ops
from trainrig.estimate.inputs import Inputs

__all__ = ["gemm_flops_per_token", "scan_flops_per_token", "scan_gemms", "elementwise_bytes_per_token",
           "saved_bytes_per_token", "state_bytes_forward", "FORWARD_KERNELS", "BACKWARD_KERNELS"]

# Kernels of one mixer's forward beside its two linears and its block's norm and residual add:
# causal_conv1d, then ssd_combined's _chunk_cumsum, _chunk_state, _state_passing, _bmm_chunk and
# _chunk_scan, then the gated RMSNorm (mamba_ssm ops/triton/ssd_combined.py, layernorm_gated.py).
FORWARD_KERNELS = 7.0
# The backward's: the recomputed convolution; the SSD backward's 16 with the gate z in the scan
# (4 recomputed: _chunk_cumsum, _bmm_chunk, _chunk_state, _state_passing; 12 gradient kernels:
# _chunk_scan_bwd_dz, _dstates, _state_passing_bwd, _chunk_scan_chunk_state_bwd_dx,
# _chunk_state_bwd_db, _chunk_scan_bwd_dC, _dcb, _bmm_chunk_bwd twice, _ddAcs_stable,
# _chunk_cumsum_bwd); the convolution's and the norm's backward (ssd_combined.py
# _mamba_chunk_scan_combined_bwd, mamba_split_conv1d_scan_combined's backward).
BACKWARD_KERNELS = 19.0


def state_bytes_forward(e):
    """Bytes per chunk-state element the forward moves: _chunk_state writes it in fp32 (4),
    _state_passing reads that (4) and writes it in the activation dtype (`e`: its out_dtype is C's,
    or `state_dtype`), _chunk_scan reads that (`e`); the backward recomputes the states and passes
    their gradients back alike, about twice that."""
    return 4.0 + 4.0 + 2 * e


def gemm_flops_per_token(x: Inputs):
    """Forward FLOPs of one mixer's in_proj and out_proj per token."""
    return 2 * x.hidden * x.mamba_in_width + 2 * x.mamba_inner * x.hidden


def scan_flops_per_token(x: Inputs):
    """Forward FLOPs of one mixer's convolution and SSD scan per token, the four chunk products
    counted over the whole chunk (not halved for the causal mask, as attention's are): C·Bᵀ
    2QNG, the chunk state 2NPH, the intra-chunk output 2QPH and the state's contribution 2NPH
    (Dao & Gu 2024 §6.3: the SSD algorithm's cost); the convolution 2K per channel of x, B and C."""
    q, n, p = x.mamba_chunk, x.mamba_state, x.mamba_head_dim
    scan = 2 * q * n * x.mamba_groups + 4 * n * p * x.mamba_heads + 2 * q * p * x.mamba_heads
    conv = 2 * x.mamba_conv * (x.mamba_inner + 2 * x.mamba_groups * n)
    return scan + conv


def scan_gemms(x: Inputs, tokens):
    """The SSD scan's forward products on one GPU as (m, n, k, batch): heads and groups split over
    TP, one product per chunk of `mamba_chunk` tokens."""
    q, n, p = x.mamba_chunk, x.mamba_state, x.mamba_head_dim
    chunks = ops.maximum(tokens / q, 1.0)
    heads, groups = chunks * x.mamba_heads / x.tp, chunks * ops.maximum(x.mamba_groups / x.tp, 1.0)
    return [(q, q, n, groups),   # C·Bᵀ within the chunk, per group
            (n, p, q, heads),    # the chunk's state Bᵀ·x
            (q, p, q, heads),    # the masked scores times x
            (q, p, n, heads)]    # C times the incoming state


def gradient_gemms(shape):
    """The two gradient products of a forward product C[m,n] = A[m,k]·B[k,n]: dA = dC·Bᵀ and
    dB = Aᵀ·dC, each as many FLOPs as the forward."""
    m, n, k, batch = shape
    return [(m, k, n, batch), (k, n, m, batch)]


def elementwise_bytes_per_token(x: Inputs, e):
    """HBM bytes one mixer's memory-bound work moves per token in the forward on one GPU (backward
    ≈ 2×, as for every layer): the convolution reads and writes x, B and C; the gated norm reads
    the scan output and z and writes its output; the chunk states go through HBM
    (`state_bytes_forward` per element, N·P per head and chunk); dt's softplus and cumulative sums
    read and write a few fp32 values per head."""
    channels = (x.mamba_inner + 2 * x.mamba_groups * x.mamba_state) / x.tp
    states = state_bytes_forward(e) * x.mamba_heads / x.tp * x.mamba_state * x.mamba_head_dim / x.mamba_chunk
    return 2 * e * channels + 3 * e * x.mamba_inner / x.tp + states + 12 * x.mamba_heads / x.tp


def saved_bytes_per_token(x: Inputs, e, linear_input):
    """Bytes one mixer keeps for its backward per token on one GPU, beyond its block's norm input
    and in_proj input: the in_proj output (z, x, B, C, dt) and the scan's output, which the fused
    function saves; the norm's input (the scan's gated output) and its fp32 reciprocal deviation per
    group; the norm's output that out_proj reads (`linear_input`: bytes per element a linear's input
    costs). The convolution's output is recomputed."""
    return (e * (x.mamba_in_width + 2 * x.mamba_inner) + linear_input * x.mamba_inner + 4 * x.mamba_groups) / x.tp
