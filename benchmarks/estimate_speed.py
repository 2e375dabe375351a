"""How long one in-process `trainrig.estimate(job)` takes (issue 16: ≤ 0.5 ms; issues 11, 12: under 1 ms),
for typical pretraining jobs and the fine-tuning worked examples of docs/finetuning.md.

    python benchmarks/estimate_speed.py [--repeats 2000]
    python benchmarks/estimate_speed.py --baseline /tmp/base     # … beside a previous checkout

Per job: min / median / max over 7 rounds of `repeats` calls (after 50 warm-up calls), in ms per
estimate of the process's CPU time (`time.process_time`: an estimate is single-threaded, and CPU
time leaves out the time other processes on a shared machine take the core away). With
`--baseline`, this checkout and the baseline run in alternating fresh processes (3 each), so a
machine that gets busier slows both alike: compare the ratio, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL_MS = 0.5  # issue 16
BAR_MS = 1.0  # issues 11 and 12: "the estimate stays under 1 ms" (the median)
_FINETUNE = Path(__file__).resolve().parents[1] / "examples" / "finetune"
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
    "llama3-8b QLoRA, 1×RTX 4090": {"model": "llama3-8b", "hardware": {"gpu": "RTX-4090", "n_gpus": 1},
                                    "training": {"seq_len": 2048, "global_batch": 16, "method": "qlora",
                                                 "framework": "hf-trainer", "recompute": "full"}},
    # the worked examples of docs/finetuning.md (issue 11)
    "QLoRA 70B, 1×48 GB": str(_FINETUNE / "qlora-70b-1x48gb.yaml"),
    "LoRA 8B, 1×24 GB": str(_FINETUNE / "lora-8b-1x24gb.yaml"),
    "full 8B bf16, 1×80 GB": str(_FINETUNE / "full-8b-1x80gb-bf16.yaml"),
    "full 70B offload, 8×80 GB": str(_FINETUNE / "full-70b-8x80gb-offload.yaml"),
}


def rounds_ms(job, repeats: int, n_rounds: int = 7) -> list[float]:
    """Milliseconds per estimate in each of `n_rounds` rounds of `repeats` calls."""
    from trainrig import estimate

    for _ in range(50):
        estimate(job)
    rounds = []
    for _ in range(n_rounds):
        start = time.process_time()
        for _ in range(repeats):
            estimate(job)
        rounds.append((time.process_time() - start) / repeats * 1e3)
    return rounds


def measure(repeats: int) -> dict[str, list[float]]:
    from trainrig import load_job

    return {name: rounds_ms(load_job(mapping), repeats) for name, mapping in JOBS.items()}


def _in_fresh_process(source_root: Path, repeats: int) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(source_root / "src")}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", "--repeats", str(repeats)],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--baseline", type=Path, help="A previous checkout to time beside this one.")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.repeats)))
        return
    root = Path(__file__).resolve().parents[1]
    sources = {"this": root} if args.baseline is None else {"this": root, "baseline": args.baseline.resolve()}
    runs: dict[str, dict[str, list[float]]] = {name: {job: [] for job in JOBS} for name in sources}
    for _ in range(3 if args.baseline else 1):
        for name, source in sources.items():
            for job, values in _in_fresh_process(source, args.repeats).items():
                runs[name][job] += values
    print(f"{'job':32s} {'version':9s} {'ms per estimate: min / median / max':>36s}   goal {GOAL_MS} ms (min)"
          f"   under {BAR_MS:g} ms (median)")
    for job in JOBS:
        for name in sources:
            values = runs[name][job]
            met = "met" if min(values) <= GOAL_MS else "missed"
            under = "yes" if statistics.median(values) < BAR_MS else "no"
            print(f"{job:32s} {name:9s} {min(values):12.3f} / {statistics.median(values):6.3f} / "
                  f"{max(values):6.3f}   {met:17s}  {under}")
        if args.baseline:
            ratio = statistics.median(runs["baseline"][job]) / statistics.median(runs["this"][job])
            print(f"{'':32s} {'ratio':9s} baseline / this = {ratio:.2f}×")


if __name__ == "__main__":
    main()
