"""GEMM times computed once per distinct row: the shortcut must give exactly what every row gives.

`per_distinct_row` trusts `GEMM_IGNORES` to name only fields the GEMM timing never reads; these
tests check each name against the code, for dense, MoE, LoRA, QLoRA, fp8 and unfused-attention jobs.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import fields

import numpy as np
import pytest

from jobs import make_job
from trainrig.estimate.inputs import Inputs, inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS

core = importlib.import_module("trainrig.estimate.core")  # `trainrig.estimate` the name is the function
distinct = importlib.import_module("trainrig.estimate.distinct")

JOBS = {
    "dense": ({}, {}),
    "moe": ({"model": "mixtral-8x7b"}, {"ep": 2, "tp": 2, "zero": 1}),
    "lora": ({"model": "llama3-8b"}, {"method": "lora", "lora_rank": 16}),
    "qlora": ({"model": "llama3-8b"}, {"method": "qlora", "lora_rank": 16}),
    "fp8 tp cp": ({"model": "llama3-8b"}, {"precision": "fp8", "tp": 2, "cp": 2, "seq_len": 8192}),
    "unfused attention": ({}, {"flash_attention": False, "recompute": "selective"}),
}


def _inputs(name: str) -> Inputs:
    model, training = JOBS[name]
    model_spec = model.get("model")
    job = make_job(model=model_spec, training=training) if model_spec else make_job(training=training)
    return inputs_from_job(job, DEFAULT_PARAMETERS)


def _gemm(x: Inputs) -> dict:
    with np.errstate(divide="ignore", invalid="ignore"):  # as in evaluate(): unused MoE/tile branches
        return core._gemm_times_s(x, DEFAULT_PARAMETERS)


def _flat(values: dict) -> list[float]:
    out = []
    for value in values.values():
        for v in value if isinstance(value, tuple) else (value,):
            out.append(float(v))
    return out


def _changed(value: float) -> float:
    return 7.0 if not math.isfinite(value) else value * 1.5 + 1.0


@pytest.mark.parametrize("name", list(JOBS))
def test_no_field_the_shortcut_ignores_changes_the_gemm_times(name):
    x = _inputs(name)
    reference = _flat(_gemm(x))
    for field in sorted(core.GEMM_IGNORES):
        perturbed = _flat(_gemm(x.with_values(**{field: _changed(float(getattr(x, field)))})))
        assert perturbed == reference, f"{field} is in GEMM_IGNORES but changes the GEMM times of the {name} job"


@pytest.mark.parametrize("field", ["tp", "micro_batch", "seq_len", "gemm_peak_tflops", "cp"])
def test_the_check_above_can_fail_fields_the_timing_reads_do_change_it(field):
    x = _inputs("dense")
    assert _flat(_gemm(x.with_values(**{field: _changed(float(getattr(x, field)))}))) != _flat(_gemm(x))


def test_every_ignored_name_is_a_field():
    assert {f.name for f in fields(Inputs)} >= core.GEMM_IGNORES


def _many_rows() -> Inputs:
    """200 rows of a dense and an LoRA job with layouts drawn at random, as a planner stacks them."""
    rng = np.random.default_rng(0)
    base = _inputs("dense")
    n = 200
    tp = rng.choice([1, 2, 4], n).astype(float)
    return Inputs(**{f.name: np.full(n, float(getattr(base, f.name))) for f in fields(Inputs)}).with_values(
        tp=tp, pp=rng.choice([1, 2], n).astype(float), dp=8 / tp, zero=rng.choice([0, 1, 3], n).astype(float),
        micro_batch=rng.choice([1, 2], n).astype(float), recompute=rng.choice([0, 1, 2], n).astype(float),
        method=rng.choice([0, 1], n).astype(float), lora_rank=np.full(n, 16.0))


def test_deduplicated_values_equal_every_row_evaluated_on_its_own():
    x = _many_rows()
    shortcut = distinct.per_distinct_row(_gemm, x, core.GEMM_IGNORES)
    assert distinct._distinct(x, core.GEMM_IGNORES) is not None  # the shortcut really ran
    direct = _gemm(x)
    for key in direct:
        for got, want in zip(np.broadcast_arrays(*shortcut[key]), np.broadcast_arrays(*direct[key]), strict=True):
            np.testing.assert_array_equal(got, want)


def test_a_hash_collision_turns_the_shortcut_off_instead_of_merging_rows(monkeypatch):
    x = _many_rows()
    monkeypatch.setattr(distinct, "_mix", lambda z: np.zeros_like(z))  # every row hashes alike
    assert distinct._distinct(x, core.GEMM_IGNORES) is None
    shortcut = distinct.per_distinct_row(_gemm, x, core.GEMM_IGNORES)
    direct = _gemm(x)
    np.testing.assert_array_equal(shortcut["attention"][0], direct["attention"][0])


def test_few_rows_are_evaluated_directly():
    x = _many_rows()
    small = Inputs(**{f.name: (v[:8] if np.ndim(v := getattr(x, f.name)) else v) for f in fields(Inputs)})
    assert distinct._distinct(small, core.GEMM_IGNORES) is None
