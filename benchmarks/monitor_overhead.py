"""What the in-process monitor costs a training loop: step time with and without it, one run.

    python benchmarks/monitor_overhead.py --hz 10 --rounds 30 --steps 100 --width 768

A CPU torch training loop (an MLP, AdamW) runs in alternating blocks of `--steps` steps: plain, then
inside `trainrig.monitor(hz=...)` with `m.data(...)` and `m.step(tokens=...)`, then plain, … for
`--rounds` rounds (the first round warms up and is dropped). Each block first runs `--settle-steps`
untimed steps (both kinds alike), so the monitor's start — a one-time cost, reported on its own —
does not count as cost per step. Alternating blocks pair each monitored
block with the plain block next to it, so drift of the machine cancels. The overhead is the median
over rounds of (monitored step time / plain step time) − 1, with a bootstrap 95% interval of that
median (a noisy, shared machine shows up as a wide interval rather than a wrong number). The same
ratio of process CPU time per step (the sampler thread's CPU included) is far less sensitive to
other load on the machine. Also reports the CPU time of one sampler tick (host via psutil, and GPUs
via NVML where there are any).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hz", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--steps", type=int, default=100, help="timed steps per block")
    p.add_argument("--settle-steps", type=int, default=10, help="untimed steps opening each block")
    p.add_argument("--width", type=int, default=1024, help="MLP width (sets the step time)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--json", action="store_true")
    return p.parse_args()


def build(width: int, batch: int) -> tuple[Any, Any, Any]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                torch.nn.Linear(4 * width, width))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = [torch.randn(batch, width) for _ in range(8)]
    return model, optimizer, data


def train_step(model: Any, optimizer: Any, x: Any) -> None:
    loss = model(x).pow(2).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def plain_block(model: Any, optimizer: Any, data: list[Any], steps: int,
                settle: int) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) per step."""
    for i in range(settle):
        train_step(model, optimizer, data[i % len(data)])
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
        train_step(model, optimizer, data[i % len(data)])
    return (time.perf_counter() - start) / steps, (time.process_time() - cpu) / steps


def monitored_block(model: Any, optimizer: Any, data: list[Any], steps: int, settle: int,
                    hz: float, ticks: list[float], starts: list[float]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds, the sampler thread's included) per step, monitored."""
    import trainrig

    began = time.perf_counter()
    m = trainrig.monitor(hz=hz, name="overhead-benchmark").start()
    starts.append(time.perf_counter() - began)
    _time_ticks(m.sampler, ticks)
    try:
        loop = m.data(data[i % len(data)] for i in range(settle + steps))
        for _, x in zip(range(settle), loop, strict=False):
            train_step(model, optimizer, x)
            m.step(tokens=x.shape[0])
        start, cpu = time.perf_counter(), time.process_time()
        for x in loop:
            train_step(model, optimizer, x)
            m.step(tokens=x.shape[0])
        elapsed, cpu_s = time.perf_counter() - start, time.process_time() - cpu
    finally:
        m.stop()
    return elapsed / steps, cpu_s / steps


def _time_ticks(sampler: Any, ticks: list[float]) -> None:
    """Wrap the sampler's tick to record the CPU time of each (thread time of the sampler thread)."""
    tick = sampler.tick

    def timed() -> None:
        start = time.thread_time()
        tick()
        ticks.append(time.thread_time() - start)

    sampler.tick = timed


def bootstrap_median_ci(values: list[float], resamples: int = 2000) -> list[float]:
    """A percentile-bootstrap 95% interval of the median (fixed seed: reproducible)."""
    import random

    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return [medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]]


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    model, optimizer, data = build(args.width, args.batch)
    ratios, cpu_ratios, plain, monitored, ticks, starts = [], [], [], [], [], []
    for round_index in range(args.rounds + 1):
        a, a_cpu = plain_block(model, optimizer, data, args.steps, args.settle_steps)
        b, b_cpu = monitored_block(model, optimizer, data, args.steps, args.settle_steps, args.hz,
                                   ticks, starts)
        if round_index == 0:
            ticks.clear()
            continue  # warm-up round
        plain.append(a)
        monitored.append(b)
        ratios.append(b / a)
        cpu_ratios.append(b_cpu / a_cpu)
    return {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "hz": args.hz, "rounds": args.rounds, "steps_per_block": args.steps,
        "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "plain_step_s_median": statistics.median(plain),
        "monitored_step_s_median": statistics.median(monitored),
        "ratio_median": statistics.median(ratios),
        "ratio_quartiles": statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else ratios,
        "ratio_median_ci95": bootstrap_median_ci(ratios),
        "overhead_pct": (statistics.median(ratios) - 1) * 100,
        "cpu_ratio_median": statistics.median(cpu_ratios),
        "cpu_ratio_median_ci95": bootstrap_median_ci(cpu_ratios),
        "cpu_overhead_pct": (statistics.median(cpu_ratios) - 1) * 100,
        "tick_s_median": statistics.median(ticks) if ticks else None,
        "monitor_start_s_median": statistics.median(starts),
        "sampler_cpu_share_pct": (statistics.median(ticks) * args.hz * 100) if ticks else None,
    }


def main() -> None:
    args = parse()
    with tempfile.TemporaryDirectory() as home:
        os.environ["TRAINRIG_HOME"] = home  # the benchmark's runs stay out of ~/.trainrig
        result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    low, high = result["ratio_median_ci95"]
    print(f"plain step      {result['plain_step_s_median'] * 1e3:8.2f} ms (median of {args.rounds} blocks)")
    print(f"monitored step  {result['monitored_step_s_median'] * 1e3:8.2f} ms at {args.hz:g} Hz")
    print(f"overhead        {result['overhead_pct']:+8.2f} % (median paired ratio {result['ratio_median']:.4f}, "
          f"95% interval {low:.4f}–{high:.4f})")
    low, high = result["cpu_ratio_median_ci95"]
    print(f"CPU time        {result['cpu_overhead_pct']:+8.2f} % per step, sampler included (median paired "
          f"ratio {result['cpu_ratio_median']:.4f}, 95% interval {low:.4f}–{high:.4f})")
    if result["tick_s_median"] is not None:
        print(f"sampler tick    {result['tick_s_median'] * 1e3:8.3f} ms CPU → {result['sampler_cpu_share_pct']:.2f} % "
              f"of one core at {args.hz:g} Hz")
    print(f"monitor start   {result['monitor_start_s_median'] * 1e3:8.1f} ms once per run (not in the step times)")


if __name__ == "__main__":
    main()
