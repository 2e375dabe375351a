"""A tiny torch training loop on CPU for the monitor's end-to-end tests (not a test module).

Plants what the tests want diagnosed: a slow data loader (`--slow-sample-s`), a loop that keeps
memory (`--leak-mib` per step), or nothing. Reports through the in-process API, so under
`trainrig monitor --` its steps land in the wrapper's run.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn.functional as F  # noqa: N812
from torch.utils.data import DataLoader, Dataset

import trainrig

VOCAB, HIDDEN = 256, 64


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--slow-sample-s", type=float, default=0.0)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--leak-mib", type=float, default=0.0)
    p.add_argument("--device-s", type=float, default=0.0, help="sleep per step, standing in for "
                                                                 "GPU time")
    p.add_argument("--hz", type=float, default=10.0)
    p.add_argument("--flush-interval-s", type=float, default=0.2)
    p.add_argument("--print-flushes", action="store_true")
    return p.parse_args()


class Tokens(Dataset):
    def __init__(self, n: int, seq: int, slow_s: float) -> None:
        self.n, self.seq, self.slow_s = n, seq, slow_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.slow_s:
            time.sleep(self.slow_s)  # the planted slow loader
        return torch.randint(0, VOCAB, (self.seq + 1,), generator=torch.Generator().manual_seed(i))


def main() -> None:
    args = parse()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, HIDDEN), torch.nn.Linear(HIDDEN, 4 * HIDDEN),
                                torch.nn.GELU(), torch.nn.Linear(4 * HIDDEN, VOCAB))
    flops_per_token = 6 * sum(p.numel() for p in model.parameters())  # 6·N (MODELING.md)
    loader = DataLoader(Tokens(args.steps * args.batch, args.seq, args.slow_sample_s),
                        batch_size=args.batch, num_workers=args.workers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    kept = []
    with trainrig.monitor(hz=args.hz, flops_per_token=flops_per_token,
                          flush_interval_s=args.flush_interval_s) as m:
        if args.print_flushes:
            m.sampler.on_flush = _print_flush
        for batch in m.data(loader):
            x, y = batch[:, :-1], batch[:, 1:]
            loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.device_s:
                time.sleep(args.device_s)
            if args.leak_mib:
                kept.append(torch.ones(int(args.leak_mib * 2**20) // 4))  # the planted memory hog
            m.step(tokens=x.numel())
    print(f"run {m.run_id} trained {m.steps.count} steps", flush=True)


def _print_flush(sampler: object) -> None:
    flushed = sampler.flushed  # type: ignore[attr-defined]
    sys.stdout.write(f"flushed {sampler.run_id} {flushed['gpu_samples']} {flushed['host_samples']} "  # type: ignore[attr-defined]
                     f"{flushed['steps']}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
