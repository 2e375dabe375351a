"""The fused-attention rate each long-sequence measured run implies, with everything else as modelled.

For every bundled case with flash attention and at least --min-seq tokens per sequence, scale the
attention kernel's rate until the estimate matches the measured tokens/s, then print that rate as a
fraction of the GPU's dense peak (forward + backward FLOPs over their time, after occupancy).

    python benchmarks/implied_attention_rate.py [--min-seq 16384] [--family mpt_]

It is how docs/accuracy.md shows that llm-foundry's Triton FlashAttention ran at the same rate at
head width 64 and 128; it changes nothing by itself.
"""

from __future__ import annotations

import argparse
import dataclasses

from trainrig.catalog.cases import load_cases
from trainrig.estimate.compute import attention_time_s, flash_forward_flops
from trainrig.estimate.core import evaluate
from trainrig.estimate.inputs import inputs_from_job, stack_inputs
from trainrig.estimate.params import DEFAULT_PARAMETERS


def _relative_error(case, x, scale: float) -> float:
    scaled = dataclasses.replace(x, attention_efficiency=x.attention_efficiency * scale)
    out = evaluate(stack_inputs([scaled]), DEFAULT_PARAMETERS)
    predicted = float(out.tokens_per_s[0]) / (x.tp * x.pp * x.cp * x.dp)
    return predicted / case.measured["tokens_per_s_per_gpu"] - 1


def _rate_fraction_of_peak(x, scale: float) -> float:
    """Forward+backward attention FLOPs of one micro-batch over their modelled time, / peak."""
    scaled = dataclasses.replace(x, attention_efficiency=x.attention_efficiency * scale)
    tokens = x.micro_batch * x.seq_len / x.cp
    heads = x.n_heads / x.tp
    forward, backward = attention_time_s(tokens, heads, scaled, DEFAULT_PARAMETERS)
    flops = flash_forward_flops(tokens, heads, x) * 3.5  # backward = 2.5 × forward
    return float(flops / (forward + backward) / (x.attention_peak_tflops * 1e12))


def implied_scale(case, x, low: float = 0.05, high: float = 4.0) -> float | None:
    """Bisection on the attention-rate multiplier; None when no multiplier in range matches."""
    if _relative_error(case, x, low) > 0 or _relative_error(case, x, high) < 0:
        return None
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (middle, high) if _relative_error(case, x, middle) < 0 else (low, middle)
    return (low + high) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-seq", type=int, default=16384)
    parser.add_argument("--family", default="mpt_", help="case id prefix")
    args = parser.parse_args()
    print(f"{'case':40s} {'head dim':>8s} {'attention kernel':>16s} {'implied rate':>13s}")
    for case in load_cases():
        t = case.job.training
        if not case.id.startswith(args.family) or not t.flash_attention or t.seq_len < args.min_seq:
            continue
        x = inputs_from_job(case.job, DEFAULT_PARAMETERS)
        scale = implied_scale(case, x)
        rate = "out of range" if scale is None else f"{_rate_fraction_of_peak(x, scale):.1%} of peak"
        print(f"{case.id:40s} {case.job.model.head_width:8d} {'FA' + str(t.flash_attention_version):>16s} {rate:>13s}")


if __name__ == "__main__":
    main()
