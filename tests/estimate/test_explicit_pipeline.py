"""Per-stage pipeline splits a job gives itself (`training.pipeline_layers`, and Megatron-Core's
decoder_first/last_pipeline_num_layers), checked against the even rule they generalize and the
worked examples of Megatron-Core's split."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import local_parameter_counts
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

MODEL = {"n_layers": 62, "hidden": 1024, "n_heads": 8, "ffn_hidden": 2816, "vocab": 32000}


def job(model=None, pp=32, **training):
    return make_job(model={**MODEL, **(model or {})}, hardware={"n_gpus": pp, "gpus_per_node": 8},
                    training={"pp": pp, "seq_len": 2048, "global_batch": 64, **training})


def test_a_list_of_one_two_and_one_is_megatrons_embedding_and_loss_slots():
    # 62 layers + 2 slots over 32 stages: 2 per stage, the ends giving one layer to the embedding/head
    listed = estimate(job(pipeline_layers=[1] + [2] * 30 + [1]))
    slotted = estimate(job(account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True))
    assert listed.step_time_s == pytest.approx(slotted.step_time_s, rel=1e-12)
    assert listed.memory_per_gpu_gib == pytest.approx(slotted.memory_per_gpu_gib, rel=1e-12)


def test_first_and_last_counts_split_the_rest_evenly_as_megatron_core_does():
    # DeepSeek-V3's 61 layers on pp 16 with one on the first stage: 60 over the other 15, 4 each
    resolved = job({"n_layers": 61}, pp=16, decoder_first_pipeline_num_layers=1).training
    assert resolved.pipeline_layers == (1,) + (4,) * 15
    both = job(pp=32, decoder_first_pipeline_num_layers=1, decoder_last_pipeline_num_layers=1).training
    assert both.pipeline_layers == (1,) + (2,) * 30 + (1,)


def test_a_remainder_megatron_core_refuses_is_refused_naming_the_field():
    with pytest.raises(TrainrigError) as error:
        job({"n_layers": 61}, pp=16, decoder_first_pipeline_num_layers=2)  # 59 over 15 stages
    assert error.value.field == "training.decoder_first_pipeline_num_layers"


@pytest.mark.parametrize("layers", [[2] * 31, [2] * 30 + [1, 1, 0], [3] * 20 + [2] * 12])
def test_a_list_that_is_not_pp_counts_summing_to_the_layers_is_refused(layers):
    with pytest.raises(TrainrigError) as error:
        job(pipeline_layers=layers)
    assert error.value.field == "training.pipeline_layers"


def test_a_list_with_slots_too_is_refused():
    with pytest.raises(TrainrigError) as error:
        job(pipeline_layers=[1] + [2] * 30 + [1], account_for_loss_in_pipeline_split=True)
    assert error.value.field == "training.pipeline_layers"


def test_the_fullest_stage_of_the_list_paces_and_the_ends_hold_theirs():
    x = inputs_from_job(job({"n_layers": 12}, pp=4, pipeline_layers=[1, 5, 4, 2]), P)
    assert (float(x.layers_per_stage), float(x.first_stage_layers), float(x.end_stage_layers)) == (5.0, 1.0, 2.0)
    five = estimate(job({"n_layers": 12}, pp=4, pipeline_layers=[1, 5, 4, 2]))
    even = estimate(job({"n_layers": 12}, pp=4))  # 3 per stage
    assert five.step_time_s > even.step_time_s
    # parameters: the fullest of 5 layers, 1 layer + embedding and 2 layers + head is the 5 layers,
    # where the even split holds 3 layers + the embedding (+ half the final norm's count either way)
    layer = 4 * 1024 * 1024 + 3 * 1024 * 2816 + 2 * 1024
    ends = 32000 * 1024
    assert float(local_parameter_counts(x)[0]) == pytest.approx(max(5 * layer, layer + ends, 2 * layer + ends) + 1024)
    even_x = inputs_from_job(job({"n_layers": 12}, pp=4), P)
    assert float(local_parameter_counts(even_x)[0]) == pytest.approx(3 * layer + ends + 1024)


def test_a_last_stage_of_only_the_output_head_is_accepted():
    # Megatron-Core's layout strings may leave the loss alone on the last stage ("...|L")
    x = inputs_from_job(job({"n_layers": 12}, pp=4, pipeline_layers=[4, 4, 4, 0]), P)
    assert float(x.end_stage_layers) == 0.0 and float(x.layers_per_stage) == 4.0
    assert estimate(job({"n_layers": 12}, pp=4, pipeline_layers=[4, 4, 4, 0])).step_time_s > 0
