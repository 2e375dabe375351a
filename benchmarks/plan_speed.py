"""Planner speed: configurations evaluated per second, and agreement with the single-configuration estimate.

    python benchmarks/plan_speed.py                      # Llama-3 70B over the whole GPU catalog
    python benchmarks/plan_speed.py --model llama3-8b --samples 200

Target (issue "Planner"): ≥ 100,000 configurations for a 70B model over the whole GPU catalog in ≤ 2 s on
2 CPU cores, and the vectorized values equal `estimate()` to 1e-9 relative on every configuration checked.
Prints the counts, the times (the first search in the process, which includes reading the catalog, and the
median of the repeats), configurations per second and the agreement check; exit code 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

import numpy as np

from trainrig import estimate, load_job
from trainrig.estimate.memory import GIB
from trainrig.plan import plan
from trainrig.plan.planner import Planner
from trainrig.plan.search import job_mapping

TARGET_CONFIGURATIONS = 100_000
TARGET_SECONDS = 2.0
TARGET_RELATIVE = 1e-9


def main() -> int:
    args = _arguments()
    request = {"model": args.model, "tokens": args.tokens, "seq_len": args.seq_len, "global_batch": args.global_batch,
               "max_gpus": args.max_gpus}
    first_s, planner, found = _timed_search(request)
    repeats_s = [_timed_search(request)[0] for _ in range(args.repeats)]
    started = time.perf_counter()
    result = plan(**request, deadline_days=args.deadline_days)
    plan_s = time.perf_counter() - started
    checked, worst = _agreement(planner, found, args.samples, args.seed)
    report = {
        "model": args.model, "n_gpu_types": len({o.gpu.id for o in planner.options}),
        "n_node_kinds": len(planner.options), "configurations_evaluated": found.n_enumerated,
        "configurations_fitting_fully_evaluated": len(found.fitting),
        "search_first_s": first_s, "search_median_s": statistics.median(repeats_s),
        "configurations_per_s": found.n_enumerated / statistics.median(repeats_s),
        "fitting_per_s": len(found.fitting) / statistics.median(repeats_s),
        "plan_end_to_end_s": plan_s, "plans": len(result.plans), "agreement_checked": checked,
        "agreement_worst_relative": worst, "cpus": os.cpu_count(), "python": platform.python_version(),
        "numpy": np.__version__,
    }
    met = (found.n_enumerated >= TARGET_CONFIGURATIONS and len(found.fitting) >= TARGET_CONFIGURATIONS
           and max(first_s, report["search_median_s"]) <= TARGET_SECONDS and worst <= TARGET_RELATIVE)
    report["targets_met"] = met
    print(json.dumps(report, indent=2) if args.json else _text(report))
    return 0 if met else 1


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama3-70b")
    parser.add_argument("--tokens", type=float, default=2e12)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--global-batch", default="1024")
    parser.add_argument("--max-gpus", type=int, default=1024)
    parser.add_argument("--deadline-days", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples", type=int, default=500, help="Fitting configurations checked against estimate().")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def _timed_search(request: dict):
    """Resolve, enumerate, check memory and evaluate everything that fits (what `plan` does before ranking)."""
    started = time.perf_counter()
    planner = Planner.create(**request)
    found = planner.run()
    return time.perf_counter() - started, planner, found


def _agreement(planner: Planner, found, samples: int, seed: int) -> tuple[int, float]:
    """Worst relative difference between the search's arrays and `estimate()` of the same job, over a random
    sample of the fitting configurations (step time, memory, tokens/s, MFU, total time, cost) and the closest
    configurations that do not fit (memory, and that they do not fit)."""
    rng = np.random.default_rng(seed)
    fitting = found.fitting
    rows = rng.choice(len(fitting), size=min(samples, len(fitting)), replace=False)
    worst = 0.0
    for i in rows:
        est = _estimate(planner, fitting, i)
        pairs = [(est.step_time_s, fitting.step_time_s[i]), (est.memory_per_gpu_gib * GIB, fitting.memory_bytes[i]),
                 (est.tokens_per_s, fitting.tokens_per_s[i]), (est.mfu, fitting.mfu[i]),
                 (est.total_time_s, fitting.total_time_s[i])]
        if est.cost_usd is not None or not math.isnan(fitting.cost_usd[i]):
            pairs.append((est.cost_usd if est.cost_usd is not None else math.nan, fitting.cost_usd[i]))
        worst = max([worst, *(_relative(a, b) for a, b in pairs), 0.0 if est.fits else math.inf])
    over = found.closest_overflow
    for i in range(len(over)):
        est = _estimate(planner, over, i)
        worst = max(worst, _relative(est.memory_per_gpu_gib * GIB, over.memory_bytes[i]),
                    math.inf if est.fits else 0.0)
    return len(rows) + len(over), worst


def _estimate(planner: Planner, candidates, i: int):
    option = planner.options[int(candidates.option[i])]
    job = load_job(job_mapping(planner.request, option, int(candidates.n_gpus[i]),
                               candidates.layouts.training_fields(int(i))))
    return estimate(job, planner.params, price_usd_per_gpu_hour=option.price_usd_per_gpu_hour, advise_fit=False)


def _relative(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.inf
    return abs(a - b) / max(abs(b), 1e-300)


def _text(r: dict) -> str:
    return "\n".join([
        f"model {r['model']}: {r['n_gpu_types']} GPU types, {r['n_node_kinds']} node kinds (catalog nodes + offers)",
        f"configurations evaluated (memory):          {r['configurations_evaluated']:,}",
        f"  of which fit and got the full model:      {r['configurations_fitting_fully_evaluated']:,}",
        f"search, first in process (incl. catalog):   {r['search_first_s']:.3f} s",
        f"search, median of repeats:                  {r['search_median_s']:.3f} s",
        f"configurations/s:                           {r['configurations_per_s']:,.0f}"
        f" (fitting, fully evaluated: {r['fitting_per_s']:,.0f}/s)",
        f"plan() end to end (search, ranking, estimates and nodes of the top plans): {r['plan_end_to_end_s']:.3f} s",
        f"agreement with estimate(): {r['agreement_checked']} configurations, worst relative difference "
        f"{r['agreement_worst_relative']:.2e}",
        f"machine: {r['cpus']} CPUs, Python {r['python']}, numpy {r['numpy']}",
        f"targets met (≥ {TARGET_CONFIGURATIONS:,} configurations in ≤ {TARGET_SECONDS:g} s, agreement ≤ "
        f"{TARGET_RELATIVE:g}): {'yes' if r['targets_met'] else 'NO'}",
    ])


if __name__ == "__main__":
    sys.exit(main())
