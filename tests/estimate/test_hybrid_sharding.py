"""training.dp_shard (HSDP): ZeRO/FSDP states sharded within groups of dp_shard ranks, replicated
across the groups, whose reduced gradient shards are all-reduced over the replicas."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate import collectives as comm
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA = {"n_layers": 16, "hidden": 4096, "n_heads": 32, "n_kv_heads": 8, "ffn_hidden": 14336, "vocab": 32000}


def job(n_gpus, **training):
    return make_job(model=LLAMA, hardware={"gpu": "H100-SXM5-80GB", "n_gpus": n_gpus, "gpus_per_node": 8,
                                           "inter_node": "ib-ndr"},
                    training={"seq_len": 4096, "global_batch": 2 * n_gpus, "zero": 3, **training})


def test_states_are_sharded_over_the_group_not_all_ranks():
    full = estimate(job(32), advise_fit=False).memory_breakdown_gib
    hybrid = estimate(job(32, dp_shard=8), advise_fit=False).memory_breakdown_gib
    assert hybrid["optimizer"] == pytest.approx(4 * full["optimizer"], rel=1e-9)
    assert estimate(job(8), advise_fit=False).memory_breakdown_gib["optimizer"] == pytest.approx(
        hybrid["optimizer"], rel=1e-9)


def test_the_shard_group_stays_in_the_node_and_the_replicas_cross_it():
    x = inputs_from_job(job(32, dp_shard=8), P)
    assert (float(x.zero_shard), float(x.dp_replicas)) == (8.0, 4.0)
    assert float(comm.GroupLinks(x.zero_shard, x.tp, x, P).nodes) == 1.0
    assert float(comm.GroupLinks(x.dp_replicas, x.tp * x.zero_shard, x, P).nodes) == 4.0


def test_the_replicas_all_reduce_adds_to_the_groups_own_traffic():
    one_node = estimate(job(8), advise_fit=False).step_breakdown_s["dp_comm"]
    hybrid = estimate(job(32, dp_shard=8), advise_fit=False).step_breakdown_s["dp_comm"]
    assert hybrid > one_node  # the same gathers and reduce-scatters inside a node, plus the all-reduce


def test_a_shard_group_of_all_ranks_is_plain_sharding():
    plain, whole = (estimate(job(32, **extra), advise_fit=False) for extra in ({}, {"dp_shard": 32}))
    assert whole.step_time_s == plain.step_time_s and whole.memory_per_gpu_gib == plain.memory_per_gpu_gib


def test_a_group_that_does_not_divide_dp_is_refused():
    with pytest.raises(TrainrigError, match="dp_shard"):
        job(32, dp_shard=6)


def test_the_planner_searches_plain_sharding_and_says_dp_shard_is_its_own():
    from trainrig import load_model
    from trainrig.plan.request import LAYOUT_FIELDS, make_request
    request = make_request(load_model("llama3-8b"), 1e11, 4096, 256, training={"dp_shard": 8, "zero": 3})
    assert "dp_shard" in LAYOUT_FIELDS and "dp_shard" not in request.training
