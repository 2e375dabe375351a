"""The CPU optimizer step under ZeRO-Offload (issue 15): CPU-Adam is the slower of the host memory
stream and the arithmetic over the cores that run it, so fewer cores never make the step faster and a
job with few cores and offload names the CPU as what binds."""

from __future__ import annotations

import math

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.estimate.host_side import optimizer_s
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA_1B = {"n_layers": 16, "hidden": 2048, "n_heads": 16, "n_kv_heads": 4, "ffn_hidden": 5632, "vocab": 32000}


def _job(cores: int | None, offload: str = "optimizer"):
    hardware = {"cpu": "xeon-8480", "host_memory": "ddr5-4800"}  # a known host memory bandwidth
    if cores is not None:
        hardware["cpu_cores_per_node"] = cores
    return make_job(model=LLAMA_1B, hardware=hardware,
                    training={"seq_len": 2048, "global_batch": 64, "micro_batch": 4, "zero": 2,
                              "offload": offload})


@pytest.mark.parametrize("offload", ["optimizer", "none"])
def test_fewer_cores_never_make_the_step_faster(offload):
    steps = [estimate(_job(cores, offload)).step_time_s for cores in (4, 8, 16, 32, 64, 128, 256)]
    assert steps == sorted(steps, reverse=True)
    if offload == "optimizer":
        assert steps[0] > 1.5 * steps[-1]  # and the cores matter for CPU-Adam at all


def test_cpu_adam_is_the_slower_of_the_memory_stream_and_the_arithmetic_over_the_cores():
    x = inputs_from_job(_job(16), P)
    local = sum(float(v) for v in _trainable(x)) / 8  # ZeRO-2 over 8 GPUs
    stream = local * float(x.optimizer_rw_bytes) / (float(x.host_memory_bandwidth_gbs) / 8 * 1e9)
    arithmetic = local / (16 / 8 * P.cpu_adam_params_per_s_per_core)
    step, _ = optimizer_s(x, P)
    assert float(step) == pytest.approx(max(stream, arithmetic), rel=1e-12)
    assert arithmetic > stream  # 2 cores per GPU: the arithmetic binds
    many = x.with_values(cpu_cores_per_node=1e6)  # cores enough, the same memory: the stream binds
    assert float(optimizer_s(many, P)[0]) == pytest.approx(stream, rel=1e-12)


def test_unknown_cores_leave_the_memory_stream_alone():
    x = inputs_from_job(_job(None), P)
    assert math.isnan(float(x.cpu_cores_per_node))
    local = sum(float(v) for v in _trainable(x)) / 8
    stream = local * float(x.optimizer_rw_bytes) / (float(x.host_memory_bandwidth_gbs) / 8 * 1e9)
    assert float(optimizer_s(x, P)[0]) == pytest.approx(stream, rel=1e-12)


def test_few_cores_and_offload_name_the_cpu_and_doubling_it_helps():
    est = estimate(_job(8))
    assert est.bottleneck == "cpu", est.bottleneck_message
    assert est.speedup_if_2x["cpu"] > 1.3
    assert estimate(_job(8, offload="none")).bottleneck != "cpu"


def _trainable(x):
    from trainrig.estimate.memory import trainable_parameter_counts

    return trainable_parameter_counts(x)


def test_the_offloaded_step_is_its_own_part_and_the_message_names_it():
    """The host's optimizer step shows as `cpu_optimizer` in the breakdown (not `other`), equal to
    the CPU-Adam time, and the bottleneck sentence says the optimizer step, not data loading."""
    job = _job(8)
    est = estimate(job)
    cpu_step = float(optimizer_s(inputs_from_job(job, P), P)[0])
    assert est.step_breakdown_s["cpu_optimizer"] == pytest.approx(cpu_step, rel=1e-12)
    assert est.step_breakdown_s["other"] == pytest.approx(P.step_overhead_s, rel=1e-9)
    assert sum(est.step_breakdown_s.values()) == pytest.approx(est.step_time_s, rel=1e-12)
    assert "optimizer step runs on the CPU" in est.bottleneck_message
    on_gpu = estimate(_job(8, offload="none"))
    assert on_gpu.step_breakdown_s["cpu_optimizer"] == 0.0
    assert on_gpu.step_breakdown_s["other"] > P.step_overhead_s  # the fused GPU step stays in `other`
