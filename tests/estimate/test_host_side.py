"""Host-side truth (issue 15): the loader model uses the cores, the workers per GPU and the data
format; fewer cores or workers never speed the step; a loader-bound job says the CPU binds."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate

TINY = {"n_layers": 4, "hidden": 512, "n_heads": 8, "ffn_hidden": 2048, "vocab": 32000, "gated_mlp": False,
        "norm": "layernorm", "bias": "all", "position_embedding": "learned", "max_positions": 4096}


def _estimate(cores: int, workers: int, data_format: str = "text"):
    return estimate(make_job(model=TINY, hardware={"cpu_cores_per_node": cores},
                             training={"seq_len": 4096, "global_batch": 256, "data_format": data_format,
                                       "loader_workers_per_gpu": workers}))


@pytest.mark.parametrize("workers", [0, 1, 2, 4])
def test_fewer_cores_never_speed_the_step(workers):
    steps = [_estimate(cores, workers).step_time_s for cores in (2, 4, 8, 12, 16, 32, 64)]
    assert steps == sorted(steps, reverse=True)
    assert steps[0] > steps[-1]  # and the core count matters at all


# from one core per training process up; below that the processes themselves share the cores
# (test_a_launch_bound_job_slows_once_its_processes_outnumber_the_cores), so an in-process loader
# can come out ahead
@pytest.mark.parametrize("cores", [8, 12, 16, 64])
def test_fewer_workers_never_speed_the_step_and_none_shows_all_loading(cores):
    steps = [_estimate(cores, workers).step_time_s for workers in (0, 1, 2, 4, 8)]
    assert steps == sorted(steps, reverse=True)
    in_process = _estimate(cores, 0)
    assert in_process.step_breakdown_s["data_loading"] > 0  # no worker: loading runs in the loop


def test_a_loader_bound_job_names_the_cpu_and_doubling_it_helps():
    est = _estimate(4, 2)
    assert est.step_breakdown_s["data_loading"] > 0.3 * est.step_time_s
    assert est.bottleneck == "cpu" and est.speedup_if_2x["cpu"] > 1.3


def test_pretokenized_data_loads_faster_than_text():
    assert _estimate(4, 2, "pretokenized").step_time_s < _estimate(4, 2, "text").step_time_s


def _launch_bound(cores: int | None):
    hardware = {"gpu": "H100-SXM5-80GB", "n_gpus": 8, **({"cpu_cores_per_node": cores} if cores else {})}
    return estimate(make_job(model="gpt3-125m", hardware=hardware,
                             training={"seq_len": 1024, "global_batch": 64, "micro_batch": 8}))


def test_training_processes_that_outnumber_the_cores_share_them():
    import numpy as np

    from trainrig.estimate.host_issue import core_sharing
    from trainrig.estimate.inputs import inputs_from_job
    from trainrig.estimate.params import DEFAULT_PARAMETERS

    x = inputs_from_job(make_job(hardware={"n_gpus": 8, "cpu_cores_per_node": 4}), DEFAULT_PARAMETERS)
    one = np.array(1.0)
    assert float(core_sharing(x, one, one)) == 2.0  # launch-bound: 8 processes each want a core, 4 exist
    assert float(core_sharing(x, one, 4 * one)) == 1.0  # issuing a quarter of the time: 2 cores' demand
    assert float(core_sharing(x.with_values(cpu_cores_per_node=np.nan), one, one)) == 1.0  # unknown: not modelled


def test_a_launch_bound_job_slows_once_its_processes_outnumber_the_cores():
    overhead = {cores: _launch_bound(cores).step_breakdown_s["launch_overhead"] for cores in (None, 16, 8, 4, 2)}
    assert overhead[None] == overhead[16] == overhead[8]  # a core per process: issue runs at full speed
    assert overhead[8] < overhead[4] < overhead[2]


def test_shared_cores_stretch_the_passes_but_the_windows_still_cover_them():
    # the data-parallel windows split the micro-batch's elapsed compute between its passes: with
    # processes sharing cores the launch overhead grows, and the windows grow with it
    from trainrig.estimate.core import _micro_batch
    from trainrig.estimate.inputs import inputs_from_job
    from trainrig.estimate.params import DEFAULT_PARAMETERS

    job = make_job(model="gpt3-125m", hardware={"gpu": "H100-SXM5-80GB", "n_gpus": 8, "cpu_cores_per_node": 2},
                   training={"seq_len": 1024, "global_batch": 64, "micro_batch": 8})
    micro = _micro_batch(inputs_from_job(job, DEFAULT_PARAMETERS), DEFAULT_PARAMETERS)
    assert float(micro["launch_overhead"]) > 0
    elapsed = micro["compute"] + micro["launch_overhead"]
    assert float(micro["forward"] + micro["backward"]) == pytest.approx(float(elapsed))


# ---- an MoE layer's own host ops (Megatron-Core's router, dispatcher and grouped GEMMs) -----------

MOE = {"n_layers": 4, "hidden": 1024, "n_heads": 8, "ffn_hidden": 2048, "vocab": 32000, "n_experts": 32, "top_k": 4,
       "expert_ffn_hidden": 512}


def _moe_host_s(framework, ep, **training):
    from trainrig.estimate import host_issue
    from trainrig.estimate.inputs import inputs_from_job
    from trainrig.estimate.params import DEFAULT_PARAMETERS as P

    job = make_job(model=MOE, hardware={"n_gpus": 8},
                   training={"framework": framework, "ep": ep, "seq_len": 1024, "global_batch": 8, **training})
    return host_issue.host_issue_s(inputs_from_job(job, P, python_floats=True), P), P.eager_op_host_us * 1e-6


def test_megatron_moe_layers_pay_their_router_dispatcher_and_per_expert_launches():
    (fwd8, bwd8), op_s = _moe_host_s("megatron", 8)  # 4 local experts
    (fwd2, bwd2), _ = _moe_host_s("megatron", 2)  # 16 local experts
    # GroupedLinear: one GEMM per local expert in each of its 2 linears, dgrad and wgrad backward
    assert fwd2 - fwd8 == pytest.approx(4 * 12 * 2 * op_s, rel=1e-9)
    assert bwd2 - bwd8 == pytest.approx(4 * 12 * 4 * op_s, rel=1e-9)
    (custom_fwd, _), _ = _moe_host_s("custom", 8)
    assert fwd8 - custom_fwd == pytest.approx(4 * (48 + 4 * 2) * op_s, rel=1e-9)  # + the router's and dispatcher's


def test_fp8_grouped_gemms_cast_each_experts_slice_unless_delayed_scaling_fuses_them():
    (delayed, _), op_s = _moe_host_s("megatron", 8, precision="fp8", fp8_recipe="delayed")
    (tensorwise, _), _ = _moe_host_s("megatron", 8, precision="fp8", fp8_recipe="tensorwise")
    (bf16, _), _ = _moe_host_s("megatron", 8)
    assert delayed == pytest.approx(bf16, rel=1e-12)
    # amax, scale and cast-transpose for each of 4 local experts, before both linears, in 4 layers
    assert tensorwise - delayed == pytest.approx(4 * 4 * 2 * 3 * op_s, rel=1e-9)


def test_transformers_grouped_mm_moe_pays_a_fixed_count_whatever_the_experts():
    from dataclasses import replace

    from trainrig.estimate import host_issue
    from trainrig.estimate.inputs import inputs_from_job
    from trainrig.estimate.params import DEFAULT_PARAMETERS as P

    def small_ops_s(n_experts):
        model = {**MOE, "n_experts": n_experts}
        job = make_job(model=model, hardware={"n_gpus": 1},
                       training={"framework": "hf-trainer", "fused_kernels": True, "seq_len": 1024, "global_batch": 1})
        x = inputs_from_job(job, P, python_floats=True)
        with_ops, without = host_issue.host_issue_s(x, P), host_issue.host_issue_s(x, replace(P, eager_op_host_us=0.0))
        return tuple(a - b for a, b in zip(with_ops, without, strict=True))

    op_s = P.eager_op_host_us * 1e-6
    # transformers 5's grouped_mm path: 16 small ops forward and 22 backward beyond the MoE kernels, 4 layers
    assert small_ops_s(32) == pytest.approx((4 * 16 * op_s, 4 * 22 * op_s), rel=1e-9)
    assert small_ops_s(128) == pytest.approx(small_ops_s(32), rel=1e-12)
