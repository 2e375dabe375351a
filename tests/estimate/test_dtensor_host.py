"""`training.compile` and the host work of eager DTensor tensor parallelism (FrameworkSpec.tp_dtensor,
host_issue._dtensor_host_s)."""

from __future__ import annotations

import dataclasses

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.estimate.host_issue import host_issue_s
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA_SMALL = {"n_layers": 8, "hidden": 2048, "n_heads": 16, "n_kv_heads": 8, "ffn_hidden": 5632,
               "vocab": 32000, "gated_mlp": True}


def job(framework="torchtitan", **training):
    return make_job(model=LLAMA_SMALL, training={"framework": framework, "seq_len": 1024, "global_batch": 8,
                                                 "micro_batch": 1, "tp": 2, **training})


def host_s(a_job, params=P):
    forward, backward = host_issue_s(inputs_from_job(a_job, params), params)
    return float(forward) + float(backward)


def test_each_sharded_linear_adds_its_measured_host_time():
    # 8 layers over 1 stage, 7 linears (separate q/k/v and gate/up); backward 1.45 times the forward
    eager, compiled = host_s(job()), host_s(job(compile=True))
    assert eager - compiled == pytest.approx(8 * 7 * P.dtensor_linear_host_us * 1e-6 * 2.45, rel=1e-9)


def test_adapters_on_sharded_linears_add_theirs():
    lora = {"method": "lora", "lora_rank": 16, "lora_targets": "all-linear"}
    extra = host_s(job("automodel", **lora)) - host_s(job("automodel", compile=True, **lora))
    linears = 8 * 7 * P.dtensor_linear_host_us * 2.45
    adapters = 8 * 7 * P.dtensor_adapter_host_us * 2.3
    assert extra == pytest.approx((linears + adapters) * 1e-6, rel=1e-9)


def test_sequence_parallelism_adds_its_norms_and_gathers_per_layer():
    plain = host_s(job()) - host_s(job(compile=True))
    sharded = host_s(job(sequence_parallel=True)) - host_s(job(sequence_parallel=True, compile=True))
    assert sharded - plain == pytest.approx(8 * P.dtensor_sequence_parallel_host_us * 1e-6 * 2.8, rel=1e-9)


def test_full_recompute_issues_the_forward_again():
    plain = host_s(job()) - host_s(job(compile=True))
    redone = host_s(job(recompute="full")) - host_s(job(recompute="full", compile=True))
    assert redone == pytest.approx(plain * 3.45 / 2.45, rel=1e-9)


@pytest.mark.parametrize("training", [{"tp": 1}, {"compile": True},
                                      {"sequence_parallel": True, "tp_comm_overlap": True}])
def test_no_dtensor_host_work_without_tp_compiled_or_under_async_tp(training):
    a_job = job(**training)
    with_zero = dataclasses.replace(P, dtensor_linear_host_us=0.0, dtensor_adapter_host_us=0.0,
                                    dtensor_sequence_parallel_host_us=0.0)
    assert host_s(a_job) == host_s(a_job, with_zero)


@pytest.mark.parametrize("framework", ["megatron", "hf-trainer", "custom"])
def test_stacks_without_dtensor_tp_pay_none(framework):
    with_zero = dataclasses.replace(P, dtensor_linear_host_us=0.0)
    assert host_s(job(framework)) == host_s(job(framework), with_zero)


def test_eager_tp_is_slower_and_named_in_the_assumptions():
    eager, compiled = estimate(job(), advise_fit=False), estimate(job(compile=True), advise_fit=False)
    assert eager.step_time_s > compiled.step_time_s
    assert any("DTensor" in line for line in eager.assumptions)
    assert not any("DTensor" in line for line in compiled.assumptions)


def test_compile_makes_fused_kernels_the_default():
    # HF Trainer runs eager kernels by default; torch_compile fuses them, unless fused_kernels says otherwise
    assert job("hf-trainer", tp=1).training.kernels_fused(False) is False
    assert job("hf-trainer", tp=1, compile=True).training.kernels_fused(False) is True
    assert job("hf-trainer", tp=1, compile=True, fused_kernels=False).training.kernels_fused(False) is False
