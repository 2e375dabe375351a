"""The vectorized search agrees with the single-configuration estimate on every configuration checked."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainrig import estimate, load_job
from trainrig.estimate.memory import GIB
from trainrig.plan.planner import Planner
from trainrig.plan.search import job_mapping

from .conftest import MOE_MODEL, offer

REL = 1e-9


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def _estimate_row(planner: Planner, candidates, i: int):
    option = planner.options[int(candidates.option[i])]
    layout = candidates.layouts.training_fields(int(i))
    job = load_job(job_mapping(planner.request, option, int(candidates.n_gpus[i]), layout))
    return estimate(job, planner.params, price_usd_per_gpu_hour=option.price_usd_per_gpu_hour, advise_fit=False)


def test_vectorized_figures_match_estimate_on_a_random_sample(small_planner):
    found = small_planner.run()
    c = found.fitting
    assert len(c) > 1000
    rng = np.random.default_rng(7)
    for i in rng.choice(len(c), 150, replace=False):
        est = _estimate_row(small_planner, c, i)
        assert est.fits
        assert _rel(est.step_time_s, c.step_time_s[i]) <= REL
        assert _rel(est.memory_per_gpu_gib * GIB, c.memory_bytes[i]) <= REL
        assert _rel(est.tokens_per_s, c.tokens_per_s[i]) <= REL
        assert _rel(est.mfu, c.mfu[i]) <= REL
        assert _rel(est.total_time_s, c.total_time_s[i]) <= REL
        if est.cost_usd is None:
            assert math.isnan(c.cost_usd[i])
        else:
            assert _rel(est.cost_usd, c.cost_usd[i]) <= REL


def test_configurations_left_out_for_memory_really_do_not_fit(small_planner):
    over = small_planner.run().closest_overflow
    for i in range(min(len(over), 20)):
        est = _estimate_row(small_planner, over, i)
        assert not est.fits
        assert _rel(est.memory_per_gpu_gib * GIB, over.memory_bytes[i]) <= REL


def test_moe_and_partial_nodes_agree_too():
    planner = Planner.create(MOE_MODEL, tokens=1e9, seq_len=4096, global_batch=64, gpu_types=["MI300X", "L40S"],
                             max_gpus=32)
    found = planner.run()
    c = found.fitting
    assert np.isfinite(c.step_time_s).all() and np.isfinite(c.total_time_s).all()
    assert set(np.unique(c.layouts.ep)) > {1}
    assert (c.n_gpus < 8).any()
    rng = np.random.default_rng(3)
    for i in rng.choice(len(c), 60, replace=False):
        est = _estimate_row(planner, c, i)
        assert _rel(est.step_time_s, c.step_time_s[i]) <= REL
        assert _rel(est.memory_per_gpu_gib * GIB, c.memory_bytes[i]) <= REL


def test_counts_add_up(small_planner):
    found = small_planner.run()
    assert found.n_enumerated >= len(found.fitting) + found.n_not_finite > 0
    assert (found.fitting.memory_bytes <= found.fitting.capacity_bytes).all()


@pytest.mark.parametrize("price", [None, 3.5])
def test_cost_is_null_exactly_when_no_price_is_known(price):
    planner = Planner.create(MOE_MODEL, tokens=1e9, seq_len=4096, global_batch=64, gpu_types=["H100-SXM5-80GB"],
                             offers=[offer(usd_per_gpu_hour=price)], max_gpus=16)
    c = planner.run().fitting
    from_offer = np.array([planner.options[i].offer is not None for i in c.option])
    assert from_offer.any() and (~from_offer).any()
    assert np.isnan(c.cost_usd[~from_offer]).all(), "catalog nodes have no price"
    if price is None:
        assert np.isnan(c.cost_usd[from_offer]).all()
    else:
        expected = c.gpu_hours[from_offer] * price
        assert np.allclose(c.cost_usd[from_offer], expected, rtol=1e-12)


def test_a_jobs_pairing_and_graphs_ride_along_where_the_layout_allows_them():
    # moe_a2a_overlap and per-layer CUDA graphs from the job: each row runs them where Megatron-Core
    # would (ep > 1, no full recompute, interleaved when pipelined) and its job file says so
    training = {"framework": "megatron", "moe_a2a_overlap": True, "cuda_graph_scope": ["attn", "moe_router"]}
    planner = Planner.create(MOE_MODEL, tokens=1e9, seq_len=4096, global_batch=64, gpu_types=["H100-SXM5-80GB"],
                             max_gpus=16, training=training)
    c = planner.run().fitting
    rng = np.random.default_rng(5)
    paired = unpaired = 0
    for i in rng.choice(len(c), 80, replace=False):
        option = planner.options[int(c.option[i])]
        layout = c.layouts.training_fields(int(i))
        mapping = job_mapping(planner.request, option, int(c.n_gpus[i]), layout)
        allowed = (layout["ep"] > 1 and layout["recompute"] != "full"
                   and (layout.get("pp", 1) == 1 or layout.get("vpp", 1) > 1))
        assert mapping["training"]["moe_a2a_overlap"] is allowed
        assert (mapping["training"]["cuda_graph_scope"] is None) is (layout["recompute"] == "full")
        paired, unpaired = paired + allowed, unpaired + (not allowed)
        est = estimate(load_job(mapping), planner.params, advise_fit=False)
        assert _rel(est.step_time_s, c.step_time_s[i]) <= REL
    assert paired and unpaired
