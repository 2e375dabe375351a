"""How long `trainrig fit` takes: the four answers for an 8B and a 70B job, and its two sweeps alone.

    python benchmarks/fit_speed.py [--repeats 5]

Each figure is the median of `--repeats` calls after one warm-up call (which loads the catalog);
the machines here are shared and noisy, so compare figures measured in one run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from trainrig import load_job
from trainrig.estimate.max_fit import largest_micro_batch, longest_seq_len
from trainrig.estimate.params import DEFAULT_PARAMETERS
from trainrig.fit_answers import fit

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
JOBS = {
    "llama3-8b, 8×H100, FSDP": EXAMPLES / "llama3-8b-8xh100.yaml",
    "llama3-70b, 64×H100, tp8 pp2": EXAMPLES / "llama3-70b-64xh100.yaml",
}


def median_s(call: Callable[[], object], repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        started_s = time.perf_counter()
        call()
        times.append(time.perf_counter() - started_s)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    header = (f"{'job':30s} {'fit() s':>8s} {'micro-batch sweep s':>20s} {'seq_len sweep s':>16s} {'rows':>6s}"
              f"  answers (micro-batch, seq_len, fewest GPUs, cheapest type)")
    print(header)
    for name, path in JOBS.items():
        job = load_job(path)
        total_s = median_s(lambda job=job: fit(job), args.repeats)
        micro_s = median_s(lambda job=job: largest_micro_batch(job, DEFAULT_PARAMETERS), args.repeats)
        seq_s = median_s(lambda job=job: longest_seq_len(job, DEFAULT_PARAMETERS), args.repeats)
        result = fit(job)
        cheapest = result.cheapest_gpu.ranked[0] if result.cheapest_gpu.ranked else None
        answers = (f"{result.micro_batch.value}, {result.seq_len.value}, {result.n_gpus_needed.value},"
                   f" {f'{cheapest.n_gpus} × {cheapest.gpu}' if cheapest else None}")
        print(f"{name:30s} {total_s:8.3f} {micro_s:20.4f} {seq_s:16.4f} {result.n_configurations_evaluated:6d}"
              f"  {answers}")


if __name__ == "__main__":
    main()
