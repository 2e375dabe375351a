"""`plan()` end to end: recommended configurations fit, re-estimate to the same figures, and the
constraints, objectives and explanations behave."""

from __future__ import annotations

import json

import pytest

import trainrig
from trainrig import TrainrigError, estimate, load_job
from trainrig.plan import compare, plan
from trainrig.plan.select import NEAR_TIE_RELATIVE

from .conftest import SMALL_MODEL, offer

SMALL = {"model": SMALL_MODEL, "tokens": 2e10, "seq_len": 2048, "global_batch": "256-512",
         "gpu_types": ["H100-SXM5-80GB", "A100-SXM4-80GB"], "max_gpus": 64}


@pytest.fixture(scope="module")
def cost_plans():
    return plan(**SMALL, deadline_days=20, top_k=4)


def test_public_api_exports_plan():
    assert trainrig.plan is plan
    assert "plan" in trainrig.__all__


def test_every_recommended_configuration_fits_and_re_estimates_to_the_same_figures(cost_plans):
    assert cost_plans.feasible and cost_plans.plans
    for p in cost_plans.plans:
        assert p.estimate.fits and p.memory_headroom_gib >= 0
        price = p.offer.usd_per_gpu_hour if p.offer else None
        again = estimate(load_job(p.job), price_usd_per_gpu_hour=price)
        assert again.to_dict() == p.estimate.to_dict()
        assert p.meets_constraints and not p.misses
        assert p.estimate.total_time_s <= 20 * 86400


def test_json_holds_the_contract_keys_and_each_plan_its_job(cost_plans):
    data = json.loads(json.dumps(cost_plans.to_dict()))
    for key in ("plans", "n_configurations_evaluated", "search_time_s", "feasible", "message", "objective",
                "constraints", "points"):
        assert key in data
    plan0 = data["plans"][0]
    for key in ("gpu", "n_gpus", "n_nodes", "layout", "estimate", "job", "node", "offer"):
        assert key in plan0
    for key in ("tp", "pp", "dp", "cp", "ep", "zero", "micro_batch", "recompute"):
        assert key in plan0["layout"]
    for key in ("memory_per_gpu_gib", "mfu", "step_time_s", "total_time_s", "gpu_hours", "cost_usd", "bottleneck"):
        assert key in plan0["estimate"]
    assert load_job(plan0["job"]).hardware.n_gpus == plan0["n_gpus"]


def test_cost_objective_ranks_priced_plans_by_cost(cost_plans):
    priced = [p.estimate for p in cost_plans.plans if p.estimate.cost_usd is not None]
    for better, worse in zip(priced, priced[1:], strict=False):
        # cheaper first, except that a cost within the near-tie tolerance goes to the faster plan
        assert better.cost_usd <= worse.cost_usd * (1 + NEAR_TIE_RELATIVE)
        if better.cost_usd > worse.cost_usd:
            assert better.total_time_s < worse.total_time_s
    assert all(p.estimate.cost_usd is not None for p in cost_plans.plans[: len(priced)])


def test_plans_are_distinct_hardware(cost_plans):
    keys = [(p.gpu, p.n_gpus, p.offer.id if p.offer else None) for p in cost_plans.plans]
    assert len(keys) == len(set(keys))


def test_time_objective_puts_the_fastest_first():
    result = plan(**SMALL, objective="time", top_k=3)
    # priced plans fastest first; any without a price after them, apart, fastest first among themselves
    priced = [p.estimate.total_time_s for p in result.plans if p.no_price_reason is None]
    unpriced = [p.estimate.total_time_s for p in result.plans if p.no_price_reason is not None]
    assert priced == sorted(priced) and unpriced == sorted(unpriced) and len(priced) == 3
    assert [p.no_price_reason is None for p in result.plans] == [True] * len(priced) + [False] * len(unpriced)


def test_pareto_plans_lie_on_the_front():
    result = plan(**SMALL, objective="pareto", top_k=4)
    chosen = [(p.estimate.total_time_s, p.estimate.cost_usd) for p in result.plans]
    assert all(c is not None for _, c in chosen)
    for t, c in chosen:
        assert not any(pt.total_time_s < t and pt.cost_usd < c for pt in result.points)
    assert [t for t, _ in chosen] == sorted(t for t, _ in chosen)


def test_node_advice_is_derived_from_the_job(cost_plans):
    for p in cost_plans.plans:
        node, job = p.node, load_job(p.job)
        gpus = job.hardware.gpus_in_node
        assert node.cpu_cores >= gpus * (job.training.loader_workers_per_gpu + 1)
        assert node.ram_gb >= gpus * job.hardware.gpu.memory_gib  # GiB ≤ GB: the floor holds in GB too
        assert node.ram_gb >= p.estimate.host_ram_gb_per_node
        assert node.storage_tb >= 2e10 * 4 / 1e12
        assert set(node.reasons) == {"cpu", "ram", "storage", "network"}
        assert (node.network is None) == (p.n_nodes == 1)


def test_multi_node_plans_size_a_network_that_beats_10_gbe():
    result = plan(SMALL_MODEL, 2e10, seq_len=2048, global_batch=512, gpu_types=["H100-SXM5-80GB"], max_gpus=64,
                  objective="time", top_k=1)
    top = result.plans[0]
    assert top.n_nodes > 1 and top.node.network is not None
    assert "eth-10g would make the step" in top.node.reasons["network"]
    slow = estimate(load_job({**top.job, "hardware": {**top.job["hardware"], "inter_node": "eth-10g"}}))
    assert slow.step_time_s > top.estimate.step_time_s


def test_nothing_meets_the_deadline_says_why_and_shows_the_closest():
    result = plan(**SMALL, deadline_days=0.01, top_k=3)
    assert not result.feasible and result.plans
    assert result.message.startswith("no configuration meets a ")
    assert "the fastest is" in result.message
    fastest = min(p.estimate.total_time_s for p in result.plans)
    assert result.plans[0].estimate.total_time_s == fastest
    assert all(not p.meets_constraints and p.misses for p in result.plans)


def test_nothing_within_budget_names_the_cheapest():
    result = plan(**SMALL, budget_usd=1.0, top_k=2)
    assert not result.feasible
    assert "the cheapest is" in result.message


def test_a_model_that_fits_nowhere_shows_the_closest_overflow():
    result = plan("llama3-70b", 1e11, gpu_types=["RTX-4090"], max_gpus=2, top_k=2)
    assert not result.feasible and result.n_configurations_fitting == 0
    assert "fits in GPU memory" in result.message
    assert result.plans and not result.plans[0].estimate.fits and result.plans[0].node is None


def test_unpriced_offer_gives_null_cost():
    unpriced = offer(id="no-price", usd_per_gpu_hour=None)
    result = plan(**{**SMALL, "gpu_types": ["H100-SXM5-80GB"]}, offers=[unpriced], priced_only=False, top_k=20)
    on_offer = [p for p in result.plans if p.offer is not None]
    assert on_offer
    for p in on_offer:
        assert p.offer.usd_per_gpu_hour is None and p.estimate.cost_usd is None
        assert p.to_dict()["estimate"]["cost_usd"] is None


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"deadline_days": -1}, "deadline_days"),
    ({"budget_usd": 0}, "budget_usd"),
    ({"max_gpus": 0}, "max_gpus"),
    ({"objective": "speed"}, "objective"),
    ({"global_batch": "2048-512"}, "global_batch"),
    ({"global_batch": "lots"}, "global_batch"),
    ({"gpu_types": ["h1000"]}, "gpu_types"),
    ({"tokens": None}, "tokens"),
    ({"precision": "int4"}, "precision"),
    ({"top_k": 0}, "top_k"),
    ({"training": {"optimizer": "lion"}}, "training.optimizer"),
])
def test_invalid_constraints_name_the_field(kwargs, field):
    with pytest.raises(TrainrigError) as error:
        plan(**{**SMALL, **kwargs})
    assert error.value.field == field
    assert str(error.value).count(".") <= 3  # one sentence (ids like A100 80GB may hold none)


def test_priced_only_without_any_priced_offer_is_an_error():
    with pytest.raises(TrainrigError) as error:
        plan(**{**SMALL, "gpu_types": ["GAUDI2"]}, priced_only=True)
    assert error.value.field == "offers"


def test_compare_gives_each_gpu_type_its_best():
    result = compare(SMALL_MODEL, 2e10, gpu_types=["h100", "a100-80gb", "mi300x", "4090"], seq_len=2048,
                     global_batch=256, max_gpus=32)
    assert [row.gpu for row in result.rows] == ["H100-SXM5-80GB", "A100-SXM4-80GB", "MI300X", "RTX-4090"]
    for row in result.rows:
        assert row.plan is not None and row.plan.gpu == row.gpu and row.plan.estimate.fits
    single = plan(SMALL_MODEL, 2e10, seq_len=2048, global_batch=256, gpu_types=["MI300X"], max_gpus=32, top_k=1)
    mi300x = next(row for row in result.rows if row.gpu == "MI300X")
    assert mi300x.plan.estimate.to_dict() == single.plans[0].estimate.to_dict()
