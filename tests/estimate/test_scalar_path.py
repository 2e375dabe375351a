"""The core's float path (estimate/ops.py) gives numpy's answers, and one estimate equals the same
configuration evaluated as one row of an array (the planner's path)."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainrig import load_job
from trainrig.estimate import ops
from trainrig.estimate.core import evaluate
from trainrig.estimate.estimator import doubled_resource_inputs
from trainrig.estimate.inputs import Inputs, inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS
from trainrig.estimate.result import RESOURCES

SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, math.inf, -math.inf, math.nan, 1e300, -1e-300]
numbers = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True))


def same(a, b) -> bool:
    """Equal as numpy compares results: NaN equals NaN, and the value's type is a number."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return bool(np.array_equal(a, b, equal_nan=True))


@settings(max_examples=300, deadline=None)
@given(numbers, numbers, st.booleans())
def test_binary_operations_match_numpy_on_floats(a, b, condition):
    a, b = np.float64(a), np.float64(b)
    with np.errstate(all="ignore"):
        assert same(ops.maximum(a, b), np.maximum(a, b))
        assert same(ops.minimum(a, b), np.minimum(a, b))
        assert same(ops.fmin(a, b), np.fmin(a, b))
        assert same(ops.where(condition, a, b), np.where(condition, a, b))
        expected = np.divide(a, b, out=np.array(7.0), where=b > 0)
        assert same(ops.divide(a, b, default=7.0), expected)


@settings(max_examples=300, deadline=None)
@given(numbers)
def test_unary_operations_match_numpy_on_floats(value):
    value = np.float64(value)
    with np.errstate(all="ignore"):
        assert same(ops.ceil(value), np.ceil(value))
        assert same(ops.floor(value), np.floor(value))
        assert same(ops.nan_to_num(value, nan=3.0), np.nan_to_num(value, nan=3.0))
        assert ops.isfinite(value) == bool(np.isfinite(value))
        assert ops.any(value > 0) == bool(np.any(value > 0))
        if value > 0:
            assert same(ops.log2(value), np.log2(value))


def test_array_arguments_take_numpy_and_broadcast():
    row = np.array([1.0, math.nan, 3.0])
    assert same(ops.maximum(row, 2.0), np.maximum(row, 2.0))
    assert same(ops.where(row > 1.5, row, 0.0), np.where(row > 1.5, row, 0.0))
    assert same(ops.nan_to_num(np.array([math.nan, math.inf, -math.inf, 1.0])),
                np.nan_to_num(np.array([math.nan, math.inf, -math.inf, 1.0])))
    assert same(ops.divide(np.array([1.0, 2.0]), np.array([0.0, 4.0]), default=9.0), [9.0, 0.5])
    assert ops.distinct_values(np.array([1.0, 3.0, 1.0])) == {1.0, 3.0}
    assert ops.distinct_values(np.float64(2.0)) == {2.0}


def test_single_numbers_divide_by_zero_as_an_array_would():
    """A discarded branch may divide by zero (an MoE term of a dense model): single-configuration
    Inputs are np.float64 by default, so that yields inf or NaN instead of raising; the estimate's
    Python floats raise, and the estimate then evaluates on np.float64 instead."""
    job = load_job("examples/llama3-8b-8xh100.yaml")
    x = inputs_from_job(job, DEFAULT_PARAMETERS)
    assert all(type(getattr(x, f.name)) is np.float64 for f in fields(Inputs))
    with np.errstate(divide="ignore", invalid="ignore"):
        assert math.isinf(x.hidden / (x.n_experts * 0.0))
    fast = inputs_from_job(job, DEFAULT_PARAMETERS, python_floats=True)
    assert all(type(getattr(fast, f.name)) is float for f in fields(Inputs))
    with pytest.raises(ZeroDivisionError):
        fast.hidden / (fast.n_experts * 0.0)  # noqa: B018


def _every_number(out) -> np.ndarray:
    """Every figure of an evaluation's Outputs, the what-if rows included, as one array."""
    values = [out.step_time_s, out.memory_bytes, out.tokens_per_s, out.mfu, out.host_ram_gb_per_node,
              out.memory_allocated_bytes, out.memory_reserved_bytes, out.memory_paged_bytes, out.fits,
              out.launch_bound_fraction, *out.step_parts_s.values(), *out.memory_parts_bytes.values()]
    rows = len(RESOURCES) + 1
    return np.concatenate([np.broadcast_to(np.asarray(v, dtype=float), (rows,)) for v in values])


def test_python_floats_give_the_numbers_np_float64_gives():
    """The estimate's Python-float path and np.float64 agree bit for bit, what-if rows included, on
    every bundled measured run (dense and MoE, LoRA, QLoRA, offload, pipelines) and example."""
    from pathlib import Path

    from trainrig.catalog.cases import load_cases

    examples = sorted(Path(__file__).resolve().parents[2].joinpath("examples").glob("*.yaml"))
    jobs = [case.job for case in load_cases()] + [load_job(path) for path in examples]
    assert len(jobs) > 300
    for job in jobs:
        as_float64 = evaluate(doubled_resource_inputs(inputs_from_job(job, DEFAULT_PARAMETERS)), DEFAULT_PARAMETERS)
        as_floats = evaluate(doubled_resource_inputs(inputs_from_job(job, DEFAULT_PARAMETERS, python_floats=True)),
                             DEFAULT_PARAMETERS)
        assert np.array_equal(_every_number(as_float64), _every_number(as_floats), equal_nan=True), job.model.name


def test_a_division_by_zero_on_python_floats_is_evaluated_again_on_float64(monkeypatch):
    """Where the Python floats divide by zero, the estimate is what np.float64 gives, not an error."""
    from trainrig import estimate
    from trainrig.estimate import estimator

    job = load_job(JOBS[1])
    expected = estimate(job)
    real = estimator.evaluate
    seen = []

    def evaluate_raising_on_floats(x, p, *args):
        seen.append(type(x.hidden))
        if type(x.hidden) is float:
            raise ZeroDivisionError("float division by zero")
        return real(x, p, *args)

    monkeypatch.setattr(estimator, "evaluate", evaluate_raising_on_floats)
    assert estimate(job) == expected
    assert seen == [float, np.float64]


def test_logical_not_of_a_single_condition_is_a_bool():
    """`~` on a Python bool is bitwise (~True == -2, which is true): ops.logical_not is not."""
    assert ops.logical_not(True) is False and ops.logical_not(False) is True
    assert ops.logical_not(np.True_) == np.False_
    assert same(ops.logical_not(np.array([True, False])), [False, True])


JOBS = [
    {"model": "llama3-8b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 8},
     "training": {"seq_len": 8192, "global_batch": 256, "zero": 3}},
    {"model": "mixtral-8x7b", "hardware": {"gpu": "A100-SXM4-80GB", "n_gpus": 32},
     "training": {"seq_len": 4096, "global_batch": 256, "ep": 8, "tp": 2, "zero": 1, "recompute": "full"}},
    {"model": "llama3-8b", "hardware": {"gpu": "RTX-4090", "n_gpus": 1},
     "training": {"seq_len": 2048, "global_batch": 16, "method": "qlora", "framework": "hf-trainer",
                  "recompute": "full"}},
    {"model": "llama3-70b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 64, "inter_node": "ib-ndr"},
     "training": {"seq_len": 8192, "global_batch": 512, "tp": 8, "pp": 2, "zero": 1, "precision": "fp8",
                  "recompute": "selective", "sequence_parallel": True, "tp_comm_overlap": True}},
]


@pytest.mark.parametrize("mapping", JOBS, ids=lambda m: m["model"])
def test_float_path_equals_the_array_path(mapping):
    """One configuration through the float path and as a row of arrays (every field an array, as
    the planner runs it) gives the same step, memory and its parts, to rounding."""
    x = inputs_from_job(load_job(mapping), DEFAULT_PARAMETERS)
    as_row = x.with_values(**{f.name: np.array([getattr(x, f.name)] * 2) for f in fields(Inputs)})
    single, row = evaluate(x, DEFAULT_PARAMETERS), evaluate(as_row, DEFAULT_PARAMETERS)
    assert type(single.step_time_s) is not np.ndarray
    for name in ("step_time_s", "memory_bytes", "tokens_per_s", "memory_allocated_bytes"):
        assert getattr(single, name) == pytest.approx(getattr(row, name)[0], rel=1e-12), name
    for part, value in single.step_parts_s.items():
        assert float(value) == pytest.approx(float(np.asarray(row.step_parts_s[part]).reshape(-1)[0]),
                                             rel=1e-12, abs=1e-15), part


def test_twice_the_compute_doubles_every_gemm_peak():
    """The 'compute 2× faster' row doubles every matrix peak the core reads, the output head's
    (kept in bf16 by fp8 recipes) included; the other rows leave them alone."""
    x = inputs_from_job(load_job(JOBS[3]), DEFAULT_PARAMETERS)
    rows = doubled_resource_inputs(x)
    compute = list(RESOURCES).index("compute") + 1
    peaks = [f.name for f in fields(Inputs) if f.name.endswith("peak_tflops") and f.name != "mfu_peak_tflops"]
    assert "head_gemm_peak_tflops" in peaks
    for name in peaks:
        column = getattr(rows, name)
        assert column[compute] == 2 * getattr(x, name), name
        assert all(column[i] == getattr(x, name) for i in range(len(column)) if i != compute), name


@pytest.mark.parametrize("mapping", JOBS, ids=lambda m: m["model"])
def test_the_estimate_is_a_valid_estimate(mapping):
    """`estimate` builds its result without re-validation: every field must already be of its type,
    so validating a dump of it gives the same object back, and its JSON holds plain numbers."""
    from trainrig import estimate
    from trainrig.estimate.result import Estimate

    est = estimate(load_job(mapping))
    assert Estimate.model_validate(est.model_dump()) == est
    assert Estimate.model_validate_json(est.model_dump_json()) == est
    assert type(est.fits) is bool and type(est.step_time_s) is float
    assert all(type(v) is float for v in est.speedup_if_2x.values())


def test_total_leaves_out_exact_zeros_only():
    """ops.total is sum(): a single 0.0 left out changes nothing, NaN and arrays always count."""
    row = np.array([1.0, 2.0])
    assert ops.total([]) == 0.0
    assert ops.total([0.0, 0.0]) == 0.0
    assert ops.total([0.0, 1.5, 0.0, 2.0]) == 3.5
    assert math.isnan(ops.total([0.0, math.nan]))
    assert same(ops.total([0.0, row, 0.0, row]), [2.0, 4.0])
    assert same(ops.total([np.zeros(2), 1.0]), [1.0, 1.0])
