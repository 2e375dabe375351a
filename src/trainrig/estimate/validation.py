"""Scoring the estimator against measured runs: per-case errors and per-source means.

Three scores per source family: throughput MAPE (tokens/s per GPU), memory MAPE (every peak-memory
metric a case has, each against the estimate of the same allocator statistic, in the case's unit)
and fit verdicts (a run that ran must be predicted to fit, an `oom` run not to)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from trainrig.catalog.cases import GIB_BYTES, MEMORY_METRICS
from trainrig.estimate.estimator import estimate
from trainrig.estimate.params import DEFAULT_PARAMETERS, ModelParameters
from trainrig.estimate.result import Estimate

__all__ = ["CaseScore", "ValidationReport", "score_cases", "source_family", "predicted_metrics"]

PRIMARY = "tokens_per_s_per_gpu"


@dataclass(frozen=True)
class CaseScore:
    id: str
    source: str
    family: str
    measured: dict[str, float]
    predicted: dict[str, float]  # the same keys as `measured`, in the same units
    error_pct: dict[str, float]  # (predicted − measured) / measured × 100, per metric
    bottleneck: str
    fits: bool  # predicted
    oom: bool = False  # measured: the run ran out of memory
    memory_per_gpu_gib: float = 0.0  # predicted, what `fits` was decided on

    @property
    def fit_right(self) -> bool:
        """The fit verdict agrees with what happened: a run that ran fits, an OOM run does not."""
        return self.fits != self.oom

    @property
    def memory_errors_pct(self) -> dict[str, float]:
        return {k: v for k, v in self.error_pct.items() if k in MEMORY_METRICS}


@dataclass(frozen=True)
class ValidationReport:
    cases: list[CaseScore]
    mape_by_source: dict[str, float]  # mean |error| of tokens/s per GPU, per source family
    mape: float  # mean over sources of their MAPE (so no one source dominates)
    worst: list[CaseScore]
    memory_mape: float | None  # mean over sources of their memory MAPE
    memory_mape_by_source: dict[str, float] | None = None  # mean |error| of every memory metric, per family
    fit_by_source: dict[str, tuple[int, int]] | None = None  # (verdicts right, cases), per family

    @property
    def fit_right(self) -> int:
        return sum(right for right, _ in (self.fit_by_source or {}).values())

    @property
    def fit_total(self) -> int:
        return sum(total for _, total in (self.fit_by_source or {}).values())

    def to_dict(self) -> dict:
        fit_by_source = self.fit_by_source or {}
        return {
            "mape_tokens_per_s_per_gpu_pct": self.mape,
            "mape_by_source_pct": self.mape_by_source,
            "max_abs_error_pct": max(
                (abs(c.error_pct[PRIMARY]) for c in self.cases if PRIMARY in c.error_pct), default=None
            ),
            "memory_mape_pct": self.memory_mape,
            "memory_mape_by_source_pct": self.memory_mape_by_source or {},
            "fit_verdicts_by_source": {f: {"right": r, "total": n} for f, (r, n) in fit_by_source.items()},
            "fit_verdicts_right": self.fit_right,
            "fit_verdicts_total": self.fit_total,
            "fit_verdicts_wrong": [c.id for c in self.cases if not c.fit_right],
            "n_cases": len(self.cases),
            "worst": [c.id for c in self.worst],
            "cases": [{**c.__dict__, "fit_right": c.fit_right} for c in self.cases],
        }


def source_family(source: str) -> str:
    """Group cases by publication: the source string up to its first comma or parenthesis."""
    for stop in (" data/", " row ", ",", "(", " Tables", " Table"):
        cut = source.find(stop)
        if cut > 0:
            source = source[:cut]
    return source.strip()


def predicted_metrics(est: Estimate) -> dict[str, float]:
    """Every metric a measured run may hold, as the estimate predicts it, in that metric's unit."""
    # An Estimate from before the allocator split carries 0 for these: fall back to the total, the
    # only peak such an estimate has, rather than score it as −100%.
    allocated_gib = est.memory_allocated_gib or est.memory_per_gpu_gib
    by_attribute = {"memory_allocated_gib": allocated_gib,
                    "memory_reserved_gib": est.memory_reserved_gib or allocated_gib}
    memory = {metric: by_attribute[attribute] * GIB_BYTES / unit_bytes
              for metric, (unit_bytes, attribute) in MEMORY_METRICS.items()}
    return {
        "tokens_per_s_per_gpu": est.tokens_per_s_per_gpu,
        "step_time_s": est.step_time_s,
        "model_tflops_per_gpu": est.model_tflops_per_gpu,
        "mfu": est.mfu,
        **memory,
    }


def score_cases(cases, params: ModelParameters = DEFAULT_PARAMETERS, n_worst: int = 5) -> ValidationReport:
    """Estimate every case with the same parameters and compare with what was measured."""
    scores = []
    for case in cases:
        est = estimate(case.job, params, advise_fit=False)
        predicted = predicted_metrics(est)
        errors = {k: (predicted[k] - v) / v * 100 for k, v in case.measured.items() if v}
        scores.append(CaseScore(case.id, case.source, source_family(case.source), case.measured,
                                {k: predicted[k] for k in case.measured}, errors, est.bottleneck, est.fits,
                                case.oom, est.memory_per_gpu_gib))
    throughput: dict[str, list[float]] = defaultdict(list)
    memory: dict[str, list[float]] = defaultdict(list)
    fit: dict[str, list[bool]] = defaultdict(list)
    for s in scores:
        if PRIMARY in s.error_pct:
            throughput[s.family].append(abs(s.error_pct[PRIMARY]))
        memory[s.family].extend(abs(e) for e in s.memory_errors_pct.values())
        fit[s.family].append(s.fit_right)
    mape_by_source = {k: float(np.mean(v)) for k, v in throughput.items()}
    memory_by_source = {k: float(np.mean(v)) for k, v in memory.items() if v}
    worst = sorted((s for s in scores if PRIMARY in s.error_pct), key=lambda s: -abs(s.error_pct[PRIMARY]))
    return ValidationReport(
        cases=scores,
        mape_by_source=mape_by_source,
        mape=float(np.mean(list(mape_by_source.values()))) if mape_by_source else float("nan"),
        worst=worst[:n_worst],
        memory_mape=float(np.mean(list(memory_by_source.values()))) if memory_by_source else None,
        memory_mape_by_source=memory_by_source,
        fit_by_source={k: (sum(v), len(v)) for k, v in fit.items()},
    )
