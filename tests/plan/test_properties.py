"""Properties over random jobs: loosening a constraint or allowing more hardware never makes the answer worse."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainrig.plan import plan

from .conftest import SMALL_MODEL

GPU_POOL = ["H100-SXM5-80GB", "A100-SXM4-80GB", "A100-SXM4-40GB", "L40S", "RTX-4090"]
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

jobs = st.fixed_dictionaries({
    "model": st.sampled_from([SMALL_MODEL, "gpt3-350m", "gpt3-1.3b"]),
    "tokens": st.sampled_from([1e9, 1e10, 5e10]),
    "seq_len": st.sampled_from([1024, 2048]),
    "global_batch": st.sampled_from([64, 128, "64-256"]),
    "method": st.sampled_from(["full", "lora"]),
})


def _run(job: dict, **kwargs):
    return plan(**job, max_gpus=32, top_k=1, priced_only=True, **kwargs)


def _best_cost(result) -> float:
    if not result.feasible:
        return math.inf
    return result.plans[0].estimate.cost_usd


def _fastest(result) -> float:
    return result.plans[0].estimate.total_time_s if result.feasible else math.inf


@SETTINGS
@given(job=jobs, gpus=st.sets(st.sampled_from(GPU_POOL[:3]), min_size=1, max_size=2),
       tight=st.floats(0.05, 3.0), factor=st.floats(1.0, 10.0))
def test_a_looser_deadline_never_raises_the_best_cost(job, gpus, tight, factor):
    strict = _run(job, gpu_types=sorted(gpus), deadline_days=tight)
    loose = _run(job, gpu_types=sorted(gpus), deadline_days=tight * factor)
    assert _best_cost(loose) <= _best_cost(strict)


@SETTINGS
@given(job=jobs, gpus=st.sets(st.sampled_from(GPU_POOL), min_size=1, max_size=3),
       extra=st.sampled_from(GPU_POOL), deadline=st.one_of(st.none(), st.floats(0.1, 5.0)))
def test_allowing_more_gpu_types_never_raises_the_best_cost(job, gpus, extra, deadline):
    fewer = _run(job, gpu_types=sorted(gpus), deadline_days=deadline)
    more = _run(job, gpu_types=sorted(gpus | {extra}), deadline_days=deadline)
    assert _best_cost(more) <= _best_cost(fewer)


@SETTINGS
@given(job=jobs, gpus=st.sets(st.sampled_from(GPU_POOL[:3]), min_size=1, max_size=3),
       budget=st.floats(1.0, 500.0), factor=st.floats(1.0, 20.0))
def test_a_higher_budget_never_lengthens_the_fastest_feasible_time(job, gpus, budget, factor):
    low = _run(job, gpu_types=sorted(gpus), budget_usd=budget, objective="time")
    high = _run(job, gpu_types=sorted(gpus), budget_usd=budget * factor, objective="time")
    assert _fastest(high) <= _fastest(low)


@SETTINGS
@given(job=jobs, deadline=st.floats(0.05, 5.0))
def test_the_best_plan_meets_the_constraints_it_reports(job, deadline):
    result = _run(job, gpu_types=["H100-SXM5-80GB", "A100-SXM4-80GB"], deadline_days=deadline)
    for p in result.plans:
        assert p.meets_constraints == result.feasible
        if result.feasible:
            assert p.estimate.fits and p.estimate.total_time_s <= deadline * 86400
            assert p.estimate.cost_usd is not None
