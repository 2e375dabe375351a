"""Host time of one small eager PyTorch op, with autograd recording it (the `eager_op_host_us` parameter).

    python benchmarks/eager_op_host_time.py

Runs on the CPU with 8×8 tensors, so the time is the dispatcher, Python and autograd's work, not
arithmetic; a GPU op adds the CUDA launch (a few µs) on top.
"""

from __future__ import annotations

import time

import torch


def _chain(x: torch.Tensor, n_pairs: int) -> torch.Tensor:
    y = x
    for _ in range(n_pairs):
        y = y * 1.0001 + 0.0  # two elementwise ops, both recorded for backward
    return y


def main() -> None:
    x = torch.randn(8, 8, requires_grad=True)
    for _ in range(200):
        _chain(x, 50).sum().backward()
    rounds, pairs = 40, 50
    start = time.perf_counter()
    for _ in range(rounds):
        _chain(x, pairs)
    forward_us = (time.perf_counter() - start) / (rounds * 2 * pairs) * 1e6
    start = time.perf_counter()
    for _ in range(rounds):
        _chain(x, pairs).sum().backward()
    both_us = (time.perf_counter() - start) / (rounds * 2 * pairs) * 1e6
    print(f"host time per eager op: forward {forward_us:.1f} µs; forward + its backward {both_us:.1f} µs")


if __name__ == "__main__":
    main()
