"""`training.grad_reduce_dtype` (Megatron-Core DDP's `grad_reduce_in_fp32`, FSDP2's `reduce_dtype`):
the accumulated gradients' bytes in memory, in the data-parallel reduction and in the optimizer
step, counted by hand."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.job_fields import optimizer_step_bytes
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

MODEL = {"n_layers": 4, "hidden": 1024, "n_heads": 8, "ffn_hidden": 4096, "vocab": 32000}


def job(**training):
    settings = {"framework": "megatron", "seq_len": 1024, "global_batch": 64, **training}
    return make_job(model=MODEL, hardware={"n_gpus": 8}, training=settings)


def test_sixteen_bit_gradients_are_two_bytes_each():
    assert float(inputs_from_job(job(), P).grad_bytes) == 4.0
    assert float(inputs_from_job(job(grad_reduce_dtype="bf16"), P).grad_bytes) == 2.0
    assert float(inputs_from_job(job(grad_reduce_dtype="fp32", master_weights=False), P).grad_bytes) == 4.0


def test_the_gradient_buffer_halves():
    # ZeRO 0 keeps every gradient on every rank: n_params × 4 B, or × 2 B
    fp32, bf16 = (estimate(job(zero=0, **given), advise_fit=False) for given in ({}, {"grad_reduce_dtype": "bf16"}))
    params = fp32.config["n_params"]
    assert fp32.memory_breakdown_gib["gradients"] == pytest.approx(params * 4 / 2**30)
    assert bf16.memory_breakdown_gib["gradients"] == pytest.approx(params * 2 / 2**30)


def test_the_reduction_moves_half_the_bytes():
    # one micro-batch per rank: the all-reduce of 25 MiB buckets outlasts the backward it hides under
    slow, fast = (estimate(job(zero=0, global_batch=8, **given), advise_fit=False)
                  for given in ({}, {"grad_reduce_dtype": "bf16"}))
    assert 0 < fast.step_breakdown_s["dp_comm"] < slow.step_breakdown_s["dp_comm"]


def test_the_step_reads_the_gradient_at_its_width():
    t32, t16 = job().training, job(grad_reduce_dtype="bf16").training
    assert optimizer_step_bytes(t32) == 34 and optimizer_step_bytes(t16) == 34 - 2


@pytest.mark.parametrize("training, said", [
    ({"precision": "fp32", "grad_reduce_dtype": "bf16"}, "fp32 training keeps fp32 parameters"),
    ({"precision": "bf16", "grad_reduce_dtype": "fp16"}, "bf16 training's 16-bit parameters are bf16"),
    ({"precision": "fp8", "grad_reduce_dtype": "fp16"}, "fp8 training's 16-bit parameters are bf16"),
])
def test_sixteen_bit_gradients_come_in_the_parameters_type(training, said):
    with pytest.raises(TrainrigError) as error:
        job(**training)
    assert error.value.field == "training.grad_reduce_dtype" and said in str(error.value)


def test_the_estimate_says_which_gradients_it_keeps():
    result = estimate(job(grad_reduce_dtype="bf16"), advise_fit=False)
    assert result.config["grad_reduce_dtype"] == "bf16"
    assert any("fp32 master weights, bf16 gradients (grad_reduce_dtype)" in line for line in result.assumptions)
