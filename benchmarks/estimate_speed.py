"""How long one `trainrig.estimate(job)` takes (issue target: under 1 ms), for a few typical jobs.

    python benchmarks/estimate_speed.py [--repeats 2000]

Reports the median of several timing rounds per job: the machines here are shared and noisy, so
compare ratios measured in one run rather than absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

from trainrig import estimate, load_job

JOBS = {
    "llama3-8b, 8×H100, FSDP": {"model": "llama3-8b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 8},
                                "training": {"seq_len": 8192, "global_batch": 256, "zero": 3}},
    "llama3-70b, 64×H100, tp8 pp2": {"model": "llama3-70b",
                                     "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 64, "inter_node": "ib-ndr"},
                                     "training": {"seq_len": 8192, "global_batch": 512, "tp": 8, "pp": 2, "zero": 1,
                                                  "recompute": "selective", "sequence_parallel": True}},
    "mixtral-8x7b, 32×A100, ep8": {"model": "mixtral-8x7b", "hardware": {"gpu": "A100-SXM4-80GB", "n_gpus": 32},
                                   "training": {"seq_len": 4096, "global_batch": 256, "ep": 8, "tp": 2, "zero": 1,
                                                "recompute": "full"}},
}


def time_one(job, repeats: int) -> float:
    """Median seconds per estimate over 5 rounds of `repeats` calls."""
    for _ in range(50):
        estimate(job)
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            estimate(job)
        rounds.append((time.perf_counter() - start) / repeats)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000)
    args = parser.parse_args()
    print(f"{'job':34s} {'fits':>5s} {'ms per estimate':>16s}")
    for name, mapping in JOBS.items():
        job = load_job(mapping)
        seconds = time_one(job, args.repeats)
        print(f"{name:34s} {str(estimate(job).fits):>5s} {seconds * 1e3:16.3f}")


if __name__ == "__main__":
    main()
