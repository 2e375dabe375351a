"""training.pp_schedule: GPipe keeps every micro-batch in flight, ZB-H1 fills the bubble with the
weight-gradient pass (Qi et al. 2024 §2.1: (p − 1)(F + B − W) against 1F1B's (p − 1)(F + B + W))."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.compute import linear_time_s
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import in_flight_layers
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

# a Llama block with its linears apart (torchtitan's code): q 4096, k/v 1024, o, gate/up/down 14336
LLAMA = {"n_layers": 16, "hidden": 4096, "n_heads": 32, "n_kv_heads": 8, "ffn_hidden": 14336, "vocab": 32000}
LINEARS = [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096), (4096, 14336), (4096, 14336), (14336, 4096)]


def job(**training):
    return make_job(model=LLAMA, hardware={"gpu": "H100-SXM5-80GB", "n_gpus": 4, "gpus_per_node": 4},
                    training={"seq_len": 4096, "global_batch": 16, "pp": 4, "framework": "torchtitan", **training})


def bubble(**training):
    return estimate(job(**training), advise_fit=False).step_breakdown_s["pp_bubble"]


def test_zb_h1_takes_two_weight_gradient_passes_off_each_bubble_micro_batch():
    x = inputs_from_job(job(pp_schedule="zb-h1"), P)
    tokens = 4096  # one sequence per micro-batch
    # each linear's weight-gradient GEMM: its backward with weight gradients less its backward without
    per_layer = sum(float(linear_time_s(tokens, i, o, x, P)[1] - linear_time_s(tokens, i, o, x, P, False)[1])
                    for i, o in LINEARS)
    weight_grad = 4 * per_layer  # 16 layers on 4 stages
    assert bubble() - bubble(pp_schedule="zb-h1") == pytest.approx(3 * 2 * weight_grad, rel=1e-9)


def test_zb_h1_gains_nothing_where_no_weight_trains():
    lora = {"method": "lora", "lora_rank": 16}
    assert bubble(pp_schedule="zb-h1", **lora) == pytest.approx(bubble(**lora), rel=1e-12)


def test_gpipe_keeps_every_micro_batch_in_flight_and_zb_h1_as_many_as_1f1b():
    one_f_one_b, gpipe, zb = (float(in_flight_layers(inputs_from_job(job(pp_schedule=s), P)))
                              for s in ("1f1b", "gpipe", "zb-h1"))
    # 16 micro-batches of 4 layers on the first stage, against min(pp, m) = 4 of them
    assert (one_f_one_b, gpipe, zb) == (4 * 4, 16 * 4, 4 * 4)
    assert bubble(pp_schedule="gpipe") == pytest.approx(bubble(), rel=1e-12)


def test_gpipe_is_refused_with_interleaving():
    with pytest.raises(TrainrigError, match="GPipe"):
        job(pp_schedule="gpipe", vpp=2)


def test_the_planner_does_not_interleave_a_gpipe_job():
    from trainrig import load_model
    from trainrig.plan.request import make_request
    request = make_request(load_model("llama3-8b"), 1e11, 4096, 256, training={"pp_schedule": "gpipe"})
    assert request.space.vpp == (1,) and request.training["pp_schedule"] == "gpipe"


def test_a_pipeline_run_per_local_batch_pays_a_bubble_per_run():
    # 16 sequences per pipeline in micro-batches of 1: local batches of 4 run the schedule 4 times
    assert bubble(pp_local_batch=4) == pytest.approx(4 * bubble(), rel=1e-12)
    assert bubble(pp_local_batch=16) == pytest.approx(bubble(), rel=1e-12)  # the whole step in one run
    assert bubble(pp_local_batch=8, vpp=2) == pytest.approx(2 * bubble(vpp=2), rel=1e-12)


def test_a_short_run_keeps_only_its_own_micro_batches_in_flight():
    layers = [float(in_flight_layers(inputs_from_job(job(**training), P)))
              for training in ({}, {"pp_local_batch": 2}, {"pp_local_batch": 2, "pp_schedule": "gpipe"})]
    # 4 layers per stage: min(pp 4, m) micro-batches on the first stage, m = 16, or 2 per run
    assert layers == [4 * 4, 2 * 4, 2 * 4]


@pytest.mark.parametrize(("training", "says"), [
    ({"pp": 1, "pp_local_batch": 4}, "needs pp > 1"),
    ({"micro_batch": 2, "pp_local_batch": 3}, "not a multiple of micro_batch 2"),
    ({"pp_local_batch": 5}, "does not divide the step's 16 sequences"),
])
def test_a_local_batch_the_schedule_cannot_run_is_refused_naming_the_field(training, says):
    with pytest.raises(TrainrigError, match=says) as error:
        job(**training)
    assert error.value.field == "training.pp_local_batch"
