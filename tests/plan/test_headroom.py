"""Recommended configurations leave GPU memory free for fragmentation and transient buffers."""

from __future__ import annotations

import pytest

from trainrig.errors import TrainrigError
from trainrig.plan import plan


@pytest.mark.parametrize("headroom", [0.0, 0.1, 0.25])
def test_every_plan_leaves_the_requested_headroom(headroom):
    result = plan("llama3-8b", tokens=1e11, gpu_types=["h100", "a100"], global_batch=256, max_gpus=16,
                  memory_headroom=headroom)
    assert result.feasible and result.plans
    for p in result.plans:
        est = p.estimate
        assert est.fits
        assert est.memory_per_gpu_gib <= est.memory_capacity_gib * (1 - headroom) * (1 + 1e-12)


def test_more_headroom_never_lowers_the_best_cost():
    costs = [plan("llama3-8b", tokens=1e11, gpu_types=["h100"], global_batch=256, max_gpus=16,
                  memory_headroom=h).plans[0].estimate.cost_usd for h in (0.0, 0.2)]
    assert costs[1] >= costs[0]


def test_a_headroom_outside_0_to_half_is_one_sentence():
    with pytest.raises(TrainrigError, match="memory_headroom"):
        plan("llama3-8b", tokens=1e11, gpu_types=["h100"], memory_headroom=0.7)
