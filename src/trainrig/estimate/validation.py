"""Scoring the estimator against measured runs: per-case errors and per-source means."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from trainrig.estimate.estimator import estimate
from trainrig.estimate.params import DEFAULT_PARAMETERS, ModelParameters
from trainrig.estimate.result import Estimate

__all__ = ["CaseScore", "ValidationReport", "score_cases", "source_family"]

PRIMARY = "tokens_per_s_per_gpu"


@dataclass(frozen=True)
class CaseScore:
    id: str
    source: str
    family: str
    measured: dict[str, float]
    predicted: dict[str, float]
    error_pct: dict[str, float]  # (predicted − measured) / measured × 100, per metric
    bottleneck: str
    fits: bool


@dataclass(frozen=True)
class ValidationReport:
    cases: list[CaseScore]
    mape_by_source: dict[str, float]  # mean |error| of tokens/s per GPU, per source family
    mape: float  # mean over sources of their MAPE (so no one source dominates)
    worst: list[CaseScore]
    memory_mape: float | None

    def to_dict(self) -> dict:
        return {
            "mape_tokens_per_s_per_gpu_pct": self.mape,
            "mape_by_source_pct": self.mape_by_source,
            "max_abs_error_pct": max(
                (abs(c.error_pct[PRIMARY]) for c in self.cases if PRIMARY in c.error_pct), default=None
            ),
            "memory_mape_pct": self.memory_mape,
            "n_cases": len(self.cases),
            "worst": [c.id for c in self.worst],
            "cases": [c.__dict__ for c in self.cases],
        }


def source_family(source: str) -> str:
    """Group cases by publication: the source string up to its first comma or parenthesis."""
    for stop in (" data/", " row ", ",", "(", " Tables", " Table"):
        cut = source.find(stop)
        if cut > 0:
            source = source[:cut]
    return source.strip()


def _predicted(est: Estimate) -> dict[str, float]:
    return {
        "tokens_per_s_per_gpu": est.tokens_per_s_per_gpu,
        "step_time_s": est.step_time_s,
        "model_tflops_per_gpu": est.model_tflops_per_gpu,
        "mfu": est.mfu,
        "memory_gib": est.memory_per_gpu_gib,
    }


def score_cases(cases, params: ModelParameters = DEFAULT_PARAMETERS, n_worst: int = 5) -> ValidationReport:
    """Estimate every case with the same parameters and compare with what was measured."""
    scores = []
    for case in cases:
        est = estimate(case.job, params, advise_fit=False)
        predicted = _predicted(est)
        errors = {k: (predicted[k] - v) / v * 100 for k, v in case.measured.items() if v}
        scores.append(CaseScore(case.id, case.source, source_family(case.source), case.measured,
                                {k: predicted[k] for k in case.measured}, errors, est.bottleneck, est.fits))
    by_source: dict[str, list[float]] = defaultdict(list)
    for s in scores:
        if PRIMARY in s.error_pct:
            by_source[s.family].append(abs(s.error_pct[PRIMARY]))
    mape_by_source = {k: float(np.mean(v)) for k, v in by_source.items()}
    memory = [abs(s.error_pct["memory_gib"]) for s in scores if "memory_gib" in s.error_pct]
    worst = sorted((s for s in scores if PRIMARY in s.error_pct), key=lambda s: -abs(s.error_pct[PRIMARY]))
    return ValidationReport(
        cases=scores,
        mape_by_source=mape_by_source,
        mape=float(np.mean(list(mape_by_source.values()))) if mape_by_source else float("nan"),
        worst=worst[:n_worst],
        memory_mape=float(np.mean(memory)) if memory else None,
    )
