"""`trainrig fit`'s answers, each checked against single jobs through the one fit rule."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from jobs import GPT_LAYER
from trainrig import estimate, load_job
from trainrig.errors import TrainrigError
from trainrig.estimate.inputs import Inputs, inputs_from_job
from trainrig.estimate.max_fit import adjusted_global_batch, longest_seq_len, sweep_inputs
from trainrig.estimate.memory import memory_fit
from trainrig.estimate.params import DEFAULT_PARAMETERS as P
from trainrig.fit_answers import fit

HARDWARE = {"gpu": "H100-SXM5-80GB", "n_gpus": 8, "gpus_per_node": 8}
TRAINING = {"seq_len": 2048, "global_batch": 64, "micro_batch": 1, "zero": 1}


def mapping(model=None, hardware=None, training=None) -> dict:
    return {"model": copy.deepcopy(model if model is not None else GPT_LAYER),
            "hardware": {**HARDWARE, **(hardware or {})}, "training": {**TRAINING, **(training or {})}}


def fits(data: dict) -> bool:
    """The fit rule on one job, built the way a user's job file is."""
    return bool(memory_fit(inputs_from_job(load_job(data), P), P)[2])


def with_training(data: dict, **changes) -> dict:
    changed = copy.deepcopy(data)
    changed["training"].update(changes)
    return changed


def with_gpus(data: dict, n_gpus: int, gpu: str | None = None) -> dict:
    """The job on `n_gpus`, dp grown (tp·pp·cp kept), the global batch the nearest valid one."""
    changed = copy.deepcopy(data)
    t = changed["training"]
    dp = n_gpus // (t.get("tp", 1) * t.get("pp", 1) * t.get("cp", 1))
    t.update(dp=dp, global_batch=int(adjusted_global_batch(t["global_batch"], t["micro_batch"], dp)))
    changed["hardware"].update(n_gpus=n_gpus, **({"gpu": gpu} if gpu else {}))
    return changed


def micro_batch_job(data: dict, micro_batch: int) -> dict:
    dp = load_job(data).training.dp_degree
    return with_training(data, micro_batch=micro_batch,
                         global_batch=int(adjusted_global_batch(data["training"]["global_batch"], micro_batch, dp)))


# ---- the largest micro-batch ----------------------------------------------------------------------


@pytest.mark.parametrize("training", [{}, {"recompute": "full"}, {"tp": 2, "sequence_parallel": True},
                                      {"pp": 2, "zero": 0, "global_batch": 256}])
def test_largest_micro_batch_fits_and_one_more_does_not(training):
    data = mapping(training=training)
    answer = fit(data, max_gpus=16).micro_batch
    m = answer.value
    assert m is not None and m > 1
    assert fits(micro_batch_job(data, m))
    assert not fits(micro_batch_job(data, m + 1))
    assert answer.global_batch == micro_batch_job(data, m)["training"]["global_batch"]


def test_a_changed_global_batch_is_said():
    data = mapping()
    answer = fit(data, max_gpus=16).micro_batch
    changed = answer.global_batch != TRAINING["global_batch"]
    assert changed == any("global_batch would change" in note for note in answer.notes)
    assert answer.grad_accum >= 1


# ---- the longest sequence -------------------------------------------------------------------------


@pytest.mark.parametrize("training", [{}, {"micro_batch": 2}, {"cp": 2}, {"flash_attention": False}])
def test_longest_seq_len_fits_and_the_next_valid_length_does_not(training):
    model = {**GPT_LAYER, "position_embedding": "rope", "max_positions": None}  # no learned-position cap
    data = mapping(model=model, training=training)
    answer = fit(data, max_gpus=16).seq_len
    step = data["training"].get("cp", 1)
    length = answer.value
    assert length is not None and length % step == 0
    assert fits(with_training(data, seq_len=length))
    assert not fits(with_training(data, seq_len=length + step))


def test_learned_positions_cap_the_sequence():
    answer = fit(mapping(), max_gpus=8).seq_len  # GPT_LAYER: learned positions, max_positions 2048
    assert answer.value == 2048
    assert any("max_positions" in note for note in answer.notes)


# ---- the sweep is the job, whatever the flattening derives -----------------------------------------


def _same_row(x: Inputs, i: int, expected: Inputs) -> bool:
    from dataclasses import fields

    for f in fields(Inputs):
        value = np.asarray(getattr(x, f.name), dtype=float)
        got = float(value[i]) if value.ndim else float(value)
        want = float(getattr(expected, f.name))
        if not (got == want or (np.isnan(got) and np.isnan(want))):
            return False
    return True


@pytest.mark.parametrize("training", [{}, {"packing": False, "mean_seq_len": 700}])
def test_every_swept_row_equals_the_inputs_of_its_own_job(training):
    job = load_job(mapping(training=training))
    values = np.arange(1, 65, dtype=float)
    batch = adjusted_global_batch(64, values, job.training.dp_degree)
    x, keep = sweep_inputs(job, P, {"micro_batch": values, "global_batch": batch})
    for row, i in enumerate(keep):
        if row % 7:
            continue
        single = load_job(with_training(mapping(training=training), micro_batch=int(values[i]),
                                        global_batch=int(batch[i])))
        assert _same_row(x, row, inputs_from_job(single, P)), int(values[i])


def test_unpacked_samples_are_swept_exactly():
    # unpacked: the padded length depends on the micro-batch, and seq_len < mean_seq_len is invalid
    data = mapping(model={**GPT_LAYER, "position_embedding": "rope", "max_positions": None},
                   training={"packing": False, "mean_seq_len": 700})
    result = fit(data, max_gpus=8)
    m = result.micro_batch.value
    assert fits(micro_batch_job(data, m)) and not fits(micro_batch_job(data, m + 1))
    sweep = longest_seq_len(load_job(data), P, limit=2**16)
    assert sweep.values.min() >= 700  # shorter lengths are not valid jobs
    length = sweep.best_value
    assert fits(with_training(data, seq_len=length)) and not fits(with_training(data, seq_len=length + 1))


# ---- the fewest GPUs ------------------------------------------------------------------------------


def test_fewest_gpus_is_the_smallest_valid_count_that_fits():
    data = {"model": "llama3-8b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 1, "gpus_per_node": 8},
            "training": {"seq_len": 8192, "global_batch": 64, "micro_batch": 1, "zero": 3}}
    assert not fits(data)
    answer = fit(data, max_gpus=64).n_gpus_needed
    n = answer.value
    assert n is not None and n > 1
    assert fits(with_gpus(data, n))
    for smaller in [k for k in range(1, n) if k <= 8 or k % 8 == 0]:
        assert not fits(with_gpus(data, smaller)), smaller
    assert any("more than the job's 1" in note for note in answer.notes)


def test_fewer_gpus_than_the_job_are_said():
    data = mapping(hardware={"n_gpus": 16}, training={"tp": 2, "global_batch": 96})
    answer = fit(data, max_gpus=64).n_gpus_needed
    assert answer.value == 2  # a 1.3B model fits on one tp=2 pair
    assert fits(with_gpus(data, 2))
    assert any("fewer than the job's 16" in note for note in answer.notes)
    assert answer.global_batch == 96 and answer.dp == 1


# ---- the cheapest GPU type ------------------------------------------------------------------------


def test_cheapest_gpu_is_the_minimum_over_every_evaluated_row():
    data = mapping(model="llama3-8b", training={"seq_len": 4096, "zero": 3, "tokens": 1e10})
    cheapest = fit(data, max_gpus=64, top=100).cheapest_gpu
    assert cheapest.ranked_by == "cost_usd"
    costs = [row.cost_usd for row in cheapest.ranked]
    assert cheapest.gpu == cheapest.ranked[0].gpu and costs[0] == min(costs) and costs == sorted(costs)
    # priced exactly where a catalog offer can host the row's GPU count (the one price rule, answers.rents)
    from trainrig.answers import rents

    offers = [o for o in __import__("trainrig").load_catalog().offers if o.usd_per_gpu_hour]
    for row in cheapest.ranked + cheapest.unpriced:
        hosted = any(o.gpu == row.gpu and rents(o, row.n_gpus) for o in offers)
        assert (row in cheapest.ranked) == hosted, (row.gpu, row.n_gpus)
    for row in cheapest.ranked[:3]:
        job = load_job(with_gpus(data, row.n_gpus, gpu=row.gpu))
        est = estimate(job, price_usd_per_gpu_hour=row.usd_per_gpu_hour)
        assert est.fits
        assert row.cost_usd == pytest.approx(est.cost_usd, rel=1e-9)
        assert row.usd_per_hour == pytest.approx(row.n_gpus * row.usd_per_gpu_hour)
        smaller = [k for k in range(1, row.n_gpus) if k <= 8 or k % 8 == 0]
        assert not any(fits(with_gpus(data, k, gpu=row.gpu)) for k in smaller)
    assert all(row.usd_per_gpu_hour is None for row in cheapest.unpriced)


def test_without_tokens_the_types_rank_by_dollars_per_hour():
    cheapest = fit(mapping(), max_gpus=16, top=100).cheapest_gpu
    assert cheapest.ranked_by == "usd_per_hour"
    per_hour = [row.usd_per_hour for row in cheapest.ranked]
    assert per_hour == sorted(per_hour) and all(row.cost_usd is None for row in cheapest.ranked)


def test_the_job_gpu_keeps_the_job_answer():
    result = fit(mapping(model="llama3-8b", training={"zero": 3}), max_gpus=64, top=100)
    own = [row for row in result.cheapest_gpu.ranked + result.cheapest_gpu.unpriced if row.is_job_gpu]
    assert len(own) == 1 and own[0].n_gpus == result.n_gpus_needed.value


# ---- nothing fits ---------------------------------------------------------------------------------


def test_a_job_that_fits_nowhere_says_so():
    data = {"model": "llama3.1-405b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 8, "gpus_per_node": 8},
            "training": {"seq_len": 8192, "global_batch": 64, "micro_batch": 1, "zero": 0}}
    result = fit(data, max_gpus=32)
    assert not result.fits
    assert result.micro_batch.value is None and result.seq_len.value is None
    assert result.n_gpus_needed.value is None and "does not fit on up to 32" in result.n_gpus_needed.notes[0]
    assert result.cheapest_gpu.gpu is None and not result.cheapest_gpu.ranked
    assert "fits on no catalog GPU type" in result.cheapest_gpu.notes[0]
    assert "H100-SXM5-80GB" in result.cheapest_gpu.fits_nowhere
    data = result.to_dict()
    assert data["micro_batch"]["value"] is None and data["cheapest_gpu"]["gpu"] is None


def test_bad_limits_name_the_field():
    with pytest.raises(TrainrigError, match="max_gpus"):
        fit(mapping(), max_gpus=0)
    with pytest.raises(TrainrigError, match="top"):
        fit(mapping(), top=0)
    with pytest.raises(TrainrigError, match="max_gpus: 2 is fewer than the tp·pp·cp = 4"):
        fit(mapping(training={"tp": 4}), max_gpus=2)


def test_public_api_exports_fit():
    import trainrig
    from trainrig import fit_answers

    assert trainrig.fit is fit_answers.fit and "fit" in trainrig.__all__
