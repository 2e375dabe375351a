"""`training.lora_dropout`: the job's adapter dropout in place of its framework's default, and the
NeMo AutoModel framework entry."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate, load_job
from trainrig.errors import TrainrigError
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import memory_state
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA_SMALL = {"n_layers": 8, "hidden": 1024, "n_heads": 8, "n_kv_heads": 4, "ffn_hidden": 2816,
               "vocab": 32000, "gated_mlp": True}
LORA = {"method": "lora", "lora_rank": 16, "lora_targets": "all-linear", "seq_len": 1024, "global_batch": 2,
        "micro_batch": 2}


def lora_job(framework, **training):
    return make_job(model=LLAMA_SMALL, hardware={"n_gpus": 1, "gpus_per_node": 1},
                    training={**LORA, "framework": framework, **training})


def with_framework_dropout(job, dropout):
    """The same job with its framework's default dropout changed instead."""
    return job.model_copy(update={"framework": job.framework.model_copy(update={"lora_dropout": dropout})})


def totals(job):
    result = estimate(job, advise_fit=False)
    state = memory_state(inputs_from_job(job, P), P)
    return result.step_time_s, float(state["activations"])


@pytest.mark.parametrize(("framework", "dropout"), [("torchtune", 0.1), ("hf-trainer", 0.0), ("automodel", 0.05)])
def test_the_job_field_has_exactly_the_effect_of_the_framework_default(framework, dropout):
    stated = totals(lora_job(framework, lora_dropout=dropout))
    as_default = totals(with_framework_dropout(lora_job(framework), dropout))
    assert stated == pytest.approx(as_default, rel=1e-12)


def test_unset_keeps_the_framework_default():
    # PEFT's 0.05 (hf-trainer) copies every adapted input for the backward; torchtune's 0.0 does not
    assert totals(lora_job("hf-trainer")) == totals(lora_job("hf-trainer", lora_dropout=0.05))
    assert totals(lora_job("torchtune")) == totals(lora_job("torchtune", lora_dropout=0.0))


def test_dropout_on_the_adapters_costs_memory_and_time():
    plain_s, plain_bytes = totals(lora_job("torchtune", lora_dropout=0.0))
    dropped_s, dropped_bytes = totals(lora_job("torchtune", lora_dropout=0.1))
    assert dropped_bytes > plain_bytes and dropped_s > plain_s


@pytest.mark.parametrize("value", [1.0, -0.1])
def test_a_dropout_outside_0_to_1_is_refused_naming_the_field(value):
    with pytest.raises(TrainrigError) as error:
        lora_job("torchtune", lora_dropout=value)
    assert error.value.field == "training.lora_dropout"


@pytest.mark.parametrize("name", ["automodel", "nemo-automodel", "NeMo AutoModel"])
def test_automodel_is_a_framework_by_its_id_and_aliases(name):
    job = load_job({"model": "llama3-8b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 1},
                    "training": {"framework": name, "method": "lora", "seq_len": 1024, "global_batch": 1}})
    assert job.training.framework == "automodel" and job.framework.lora_dropout == 0.0


def test_automodel_runs_separate_projections_and_gathers_keys_for_context_parallelism():
    job = make_job(model=LLAMA_SMALL, hardware={"n_gpus": 2, "gpus_per_node": 2},
                   training={"framework": "automodel", "seq_len": 8192, "global_batch": 1, "cp": 2})
    x = inputs_from_job(job, P)
    assert float(x.linears_per_layer) == 7  # q, k, v, o and gate, up, down apart
    assert float(x.cp_kind) == 1.0  # all-gather (job_fields.CP_KIND_CODE)


def test_dropout_on_the_adapters_output_keeps_a_one_byte_mask_as_wide_as_each_output():
    # AutoModel drops B's output (dropout_position post): per token and layer one byte for each
    # adapted output: q 8·128, k and v 4·128 each, o 1024, gate and up 2816 each, down 1024
    plain = totals(lora_job("automodel", lora_dropout=0.0))[1]
    dropped = totals(lora_job("automodel", lora_dropout=0.1))[1]
    tokens, layers = 2 * 1024, 8
    assert dropped - plain == pytest.approx(tokens * layers * (1024 + 512 + 512 + 1024 + 2816 + 2816 + 1024), rel=1e-9)


def test_dropout_on_the_input_copies_the_inputs_instead():
    job = lora_job("automodel", lora_dropout=0.1)
    on_input = job.model_copy(update={"framework": job.framework.model_copy(
        update={"lora_dropout_position": "input"})})
    x_out, x_in = inputs_from_job(job, P), inputs_from_job(on_input, P)
    assert (float(x_out.lora_output_dropout), float(x_out.lora_dropout)) == (1.0, 0.0)
    assert (float(x_in.lora_output_dropout), float(x_in.lora_dropout)) == (0.0, 1.0)
    assert totals(on_input)[1] != totals(job)[1]


def test_automodel_trains_in_pure_bf16_unless_the_job_asks_for_a_master_copy():
    hardware = {"gpu": "H100-SXM5-80GB", "n_gpus": 1}
    training = {"framework": "automodel", "seq_len": 1024, "global_batch": 1}
    unstated = load_job({"model": "llama3-8b", "hardware": hardware, "training": training})
    stated = load_job({"model": "llama3-8b", "hardware": hardware, "training": {**training, "master_weights": True}})
    assert (unstated.training.master_weights, stated.training.master_weights) == (False, True)
    assert any("no fp32 master copy" in line for line in estimate(unstated).assumptions)
    pure, mixed = (float(memory_state(inputs_from_job(job, P), P)["optimizer"]) for job in (unstated, stated))
    # AdamW: master 4 + moments 4 + 4 bytes per parameter with a master copy, moments 2 + 2 in bf16
    assert mixed - pure == pytest.approx(8 * unstated.model.n_params, rel=1e-9)
