"""Fit the model's named efficiency parameters on half of the bundled measured runs and score the
other half. Prints both scores and the fitted values; it changes nothing by itself (copy the values
into estimate/params.py by hand, with the command and the scores in docs/accuracy.md).

    python benchmarks/calibrate.py [--rounds 4] [--fit name,name,...]

Every case's estimate is computed in one vectorized call per parameter set (the planner's path).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from trainrig.catalog.cases import load_cases
from trainrig.estimate.core import evaluate
from trainrig.estimate.inputs import inputs_from_job, stack_inputs
from trainrig.estimate.params import DEFAULT_PARAMETERS, ModelParameters
from trainrig.estimate.validation import source_family

# parameter: (lower, upper) bounds of the search
PENALTY = 0.5

SEARCH_SPACE = {
    "sustained_matmul_fraction": (0.5, 1.0),
    "gemm_k_overhead": (0.0, 1024.0),
    "default_attention_efficiency": (0.2, 1.0),
    "elementwise_traffic_factor": (1.0, 5.0),
    "kernel_launch_us": (2.0, 120.0),
    "host_gpu_overlap_exponent": (1.5, 12.0),
    "collective_overhead_us": (5.0, 400.0),
    "step_overhead_s": (0.0, 0.1),
    "dp_overlap_fraction": (0.2, 1.0),
}


def split(cases):
    """Alternate cases within each source family: even positions fit, odd positions are held out."""
    seen: dict[str, int] = defaultdict(int)
    fit, held = [], []
    for case in cases:
        family = source_family(case.source)
        (fit if seen[family] % 2 == 0 else held).append(case)
        seen[family] += 1
    return fit, held


def errors_pct(cases, params: ModelParameters) -> np.ndarray:
    x = stack_inputs([inputs_from_job(c.job, params) for c in cases])
    out = evaluate(x, params)
    predicted = out.tokens_per_s / (x.tp * x.pp * x.cp * x.dp)
    measured = np.array([c.measured["tokens_per_s_per_gpu"] for c in cases])
    return (predicted - measured) / measured * 100


def score(cases, params) -> tuple[float, float, dict[str, float]]:
    err = np.abs(errors_pct(cases, params))
    families = np.array([source_family(c.source) for c in cases])
    by_source = {f: float(err[families == f].mean()) for f in dict.fromkeys(families)}
    return float(np.mean(list(by_source.values()))), float(err.max()), by_source


def objective(cases, params) -> float:
    mean, _, _ = score(cases, params)
    err = np.abs(errors_pct(cases, params))
    return mean + PENALTY * float(np.mean(np.maximum(err - 25.0, 0.0)))


def coordinate_descent(cases, params: ModelParameters, names: list[str], rounds: int) -> ModelParameters:
    best = objective(cases, params)
    for _ in range(rounds):
        for name in names:
            low, high = SEARCH_SPACE[name]
            for value in np.linspace(low, high, 17):
                trial = params.with_overrides(**{name: float(value)})
                value_score = objective(cases, trial)
                if value_score < best - 1e-9:
                    best, params = value_score, trial
            # refine around the current value
            current = getattr(params, name)
            for value in current * np.linspace(0.85, 1.15, 13):
                trial = params.with_overrides(**{name: float(np.clip(value, low, high))})
                value_score = objective(cases, trial)
                if value_score < best - 1e-9:
                    best, params = value_score, trial
    return params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fit", default=",".join(SEARCH_SPACE))
    parser.add_argument("--penalty", type=float, default=PENALTY)
    args = parser.parse_args()
    # throughput is what is fitted: memory-only and OOM runs (most of the fine-tuning set) have none
    cases = [c for c in load_cases() if "tokens_per_s_per_gpu" in c.measured]
    fit_cases, held_cases = split(cases)
    names = [n for n in args.fit.split(",") if n]
    globals()["PENALTY"] = args.penalty
    start = time.perf_counter()
    fitted = coordinate_descent(fit_cases, DEFAULT_PARAMETERS, names, args.rounds)
    print(f"fitted {len(names)} parameters on {len(fit_cases)} cases in {time.perf_counter() - start:.0f} s")
    for name in names:
        print(f"  {name} = {getattr(fitted, name):.4g}   (default {getattr(DEFAULT_PARAMETERS, name):.4g})")
    for label, subset in (("fit half", fit_cases), ("held-out half", held_cases), ("all", cases)):
        for tag, params in (("default", DEFAULT_PARAMETERS), ("fitted", fitted)):
            mean, worst, by_source = score(subset, params)
            sources = ", ".join(f"{k[:24]} {v:.1f}%" for k, v in by_source.items())
            print(f"{label:14s} {tag:8s} MAPE {mean:5.1f}%  worst {worst:5.1f}%  [{sources}]")


if __name__ == "__main__":
    main()
