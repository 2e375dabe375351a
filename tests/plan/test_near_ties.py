"""Near-ties in cost (issue 14): costs within NEAR_TIE_RELATIVE of each other rank as equal and the faster
plan comes first; anything cheaper by more than that still ranks first. And `per_gpu_type`: one plan per
GPU type, each the one `compare` picks for that type."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from trainrig.plan import compare, plan
from trainrig.plan.search import Candidates
from trainrig.plan.select import NEAR_TIE_RELATIVE, near_tie_groups, ranked
from trainrig.plan.space import Layouts

from .conftest import SMALL_MODEL

DAY_S = 86400.0


def _candidates(time_s: list[float], cost_usd: list[float]) -> Candidates:
    """Candidates that differ only in time and cost: all `ranked` reads."""
    n = len(time_s)
    ones, nan = np.ones(n, dtype=np.int64), np.full(n, np.nan)
    layouts = Layouts(**{f.name: ones for f in fields(Layouts)})
    return Candidates(option=np.arange(n), n_gpus=ones * 8, layouts=layouts, memory_bytes=nan, capacity_bytes=nan,
                      step_time_s=nan, tokens_per_s=nan, mfu=nan, total_time_s=np.array(time_s, dtype=float),
                      gpu_hours=nan, price_usd_per_gpu_hour=nan, cost_usd=np.array(cost_usd, dtype=float))


def test_the_issues_pair_ranks_the_twice_as_fast_plan_first():
    # issue 14: #1 16.6 days at $175,682, #2 8.3 days at $175,748 (0.04 % dearer): #2 should come first
    c = _candidates([16.6 * DAY_S, 8.3 * DAY_S], [175_682.0, 175_748.0])
    everything = np.arange(2)
    assert ranked(c, everything, "cost", near_tie_relative=NEAR_TIE_RELATIVE).tolist() == [1, 0]
    assert ranked(c, everything, "cost").tolist() == [0, 1]  # the strict order ("the cheapest is …") stays


def test_a_plan_cheaper_by_more_than_the_tolerance_still_ranks_first():
    dearer = 100_000.0 * (1 + 2 * NEAR_TIE_RELATIVE)
    c = _candidates([20 * DAY_S, 5 * DAY_S], [100_000.0, dearer])
    assert ranked(c, np.arange(2), "cost", near_tie_relative=NEAR_TIE_RELATIVE).tolist() == [0, 1]


def test_unpriced_configurations_rank_after_every_priced_one_fastest_first():
    c = _candidates([9 * DAY_S, 1 * DAY_S, 3 * DAY_S, 2 * DAY_S], [np.nan, np.nan, 500.0, 501.0])
    assert ranked(c, np.arange(4), "cost", near_tie_relative=NEAR_TIE_RELATIVE).tolist() == [3, 2, 1, 0]


def test_the_time_objective_is_unchanged_by_the_tolerance():
    c = _candidates([2 * DAY_S, 1 * DAY_S, 1.001 * DAY_S], [10.0, 20.0, 5.0])
    assert ranked(c, np.arange(3), "time", near_tie_relative=NEAR_TIE_RELATIVE).tolist() == [1, 2, 0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_group_spans_at_most_the_tolerance_and_groups_ascend(seed):
    values = np.random.default_rng(seed).lognormal(mean=10, sigma=2, size=2000)
    groups = near_tie_groups(values, NEAR_TIE_RELATIVE)
    for group in np.unique(groups):
        members = values[groups == group]
        assert members.max() <= members.min() * (1 + NEAR_TIE_RELATIVE)
    order = np.argsort(values)
    assert np.all(np.diff(groups[order]) >= 0)  # a cheaper value never lands in a later group
    assert len(np.unique(groups)) > 1


SEARCH = {"model": SMALL_MODEL, "tokens": 2e10, "seq_len": 2048, "global_batch": "256-512",
          "gpu_types": ["H100-SXM5-80GB", "A100-SXM4-80GB", "L40S"], "max_gpus": 64, "deadline_days": 30}


def test_per_gpu_type_gives_each_types_best_the_one_compare_picks():
    result = plan(**SEARCH, top_k=5, per_gpu_type=True)
    gpus = [p.gpu for p in result.plans]
    assert len(gpus) == len(set(gpus)) and len(gpus) >= 2
    rows = {row.gpu: row.plan for row in compare(**SEARCH).rows if row.plan is not None and row.reason is None}
    for chosen in result.plans:
        theirs = rows[chosen.gpu]
        assert (chosen.n_gpus, chosen.layout, chosen.estimate.cost_usd) == (theirs.n_gpus, theirs.layout,
                                                                            theirs.estimate.cost_usd)


def test_progress_counts_up_to_the_configurations_evaluated():
    heard: list[tuple[int, int]] = []
    result = plan(**SEARCH, progress=lambda evaluated, total: heard.append((evaluated, total)))
    assert heard[0][0] == 0 and len(heard) > 1
    assert {total for _, total in heard} == {result.n_configurations_evaluated}
    assert [done for done, _ in heard] == sorted(done for done, _ in heard)
    assert heard[-1][0] == result.n_configurations_evaluated
