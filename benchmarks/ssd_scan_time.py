"""trainrig's Mamba-2 SSD scan forward on one GPU beside a published measurement of mamba_ssm's
Triton kernels: vLLM PR #27299 ("Mamba2 SSD add fused kernel"), one H100, the five-kernel forward
(chunk_cumsum, chunk_state, state_passing, bmm_chunk, chunk_scan) at Granite-4.0-H-small's mixer
shape — 128 heads of 64, state 128, one group — batch 1, chunk 256: 1.26e7 tokens/s at 8,192
tokens, 1.29e7 at 16,384. Fitted on nothing.

    python benchmarks/ssd_scan_time.py

The estimate is the scan's chunk products (core._gemm_times_s: the mixer's GEMMs less its two
linears) plus the chunk states' HBM round trips (mamba.state_bytes_forward); the convolution and
the gated norm, which the measured chain does not run, are left out.
"""

from __future__ import annotations

from trainrig import load_job
from trainrig.estimate import core, mamba
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS

# heads, head dim, state, groups, chunk, tokens, measured tokens/s (vLLM PR #27299, "Original")
ROWS = [(128, 64, 128, 1, 256, 8192, 1.26e7), (128, 64, 128, 1, 256, 16384, 1.29e7)]


def scan_forward_s(heads, head_dim, state, groups, chunk, tokens, gpu="H100-SXM5-80GB"):
    """(chunk products, chunk-state traffic) of one mixer's SSD forward over `tokens`, in seconds."""
    model = {"name": "ssd", "n_layers": 1, "hidden": heads * head_dim // 2, "n_heads": 8, "ffn_hidden": 1024,
             "vocab": 32000, "position_embedding": "none", "layer_pattern": "M", "mamba_heads": heads,
             "mamba_head_dim": head_dim, "mamba_state_dim": state, "mamba_groups": groups, "mamba_chunk_size": chunk}
    job = load_job({"model": model, "hardware": {"gpu": gpu, "n_gpus": 1},
                    "training": {"seq_len": tokens, "micro_batch": 1, "global_batch": 1}})
    x = inputs_from_job(job, DEFAULT_PARAMETERS, python_floats=True)
    gemms = core._gemm_times_s(x, DEFAULT_PARAMETERS)
    products = gemms["mamba"][0] - gemms["mamba_linears"][0]
    state_bytes = mamba.state_bytes_forward(x.activation_bytes) * heads * state * head_dim / chunk * tokens
    return float(products), state_bytes / (x.hbm_bandwidth_gbs * 1e9)


def main() -> None:
    print(f"{'shape (H, P, N, G, Q)':<24}{'tokens':>8}{'measured ms':>13}{'products':>10}{'states':>8}"
          f"{'estimate':>10}{'time err':>10}")
    for heads, head_dim, state, groups, chunk, tokens, rate in ROWS:
        products, states = scan_forward_s(heads, head_dim, state, groups, chunk, tokens)
        measured = tokens / rate
        shape = f"{heads}, {head_dim}, {state}, {groups}, {chunk}"
        print(f"{shape:<24}{tokens:>8}{measured * 1e3:>13.3f}{products * 1e3:>10.3f}{states * 1e3:>8.3f}"
              f"{(products + states) * 1e3:>10.3f}{(products + states) / measured - 1:>+10.1%}")


if __name__ == "__main__":
    main()
