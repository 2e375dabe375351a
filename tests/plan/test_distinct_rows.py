"""Plans a person can choose between (issue 15): the same machine never appears twice, once
priced and once not, or as two identical offers."""

from __future__ import annotations

from trainrig.plan.planner import plan

from .conftest import SMALL_MODEL, offer


def _rows(result):
    return [(p.gpu, p.n_gpus, p.estimate.step_time_s, p.estimate.memory_per_gpu_gib) for p in result.plans]


def test_a_catalog_node_and_an_offer_of_the_same_hardware_give_one_row_the_priced_one():
    # the offer is the catalog's own H100 node (nodes of 8, default links), so both rank alike by time
    same = offer(id="same-as-catalog", gpus_per_node=8, min_gpus=1)
    result = plan(SMALL_MODEL, tokens=1e10, gpu_types=["H100-SXM5-80GB"], offers=[same], objective="time",
                  max_gpus=8, top_k=5)
    rows = _rows(result)
    assert len(rows) == len(set(rows)), rows
    by_machine = {}
    for p in result.plans:
        by_machine.setdefault((p.n_gpus, p.estimate.step_time_s), []).append(p)
    assert all(len(plans) == 1 for plans in by_machine.values())
    assert result.plans[0].offer is not None  # the tie went to the row with a price


def test_two_identical_offers_at_different_prices_show_once():
    cheap, dear = offer(id="cheap", usd_per_gpu_hour=2.0, min_gpus=1), offer(id="dear", usd_per_gpu_hour=3.0,
                                                                             min_gpus=1, provider="other")
    result = plan(SMALL_MODEL, tokens=1e10, gpu_types=["H100-SXM5-80GB"], offers=[cheap, dear], objective="time",
                  max_gpus=8, top_k=5, priced_only=True)
    rows = _rows(result)
    assert len(rows) == len(set(rows)), rows
