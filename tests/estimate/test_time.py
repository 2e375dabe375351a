"""Step-time model: collectives, pipeline, overlap, host side, bottleneck and monotonicity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import make_job
from trainrig import estimate
from trainrig.estimate import collectives as comm
from trainrig.estimate.core import evaluate
from trainrig.estimate.estimator import doubled_resource_inputs
from trainrig.estimate.inputs import inputs_from_job, stack_inputs
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

CONTRACT_KEYS = {"fits", "memory_per_gpu_gib", "memory_breakdown_gib", "step_time_s", "step_breakdown_s",
                 "tokens_per_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "bottleneck",
                 "total_time_s", "gpu_hours", "cost_usd", "warnings"}


def test_ring_allreduce_inside_a_node_matches_the_hand_formula():
    x = inputs_from_job(make_job(), P)
    group = comm.GroupLinks(8, 1.0, x, P)
    nbytes = 256e6
    bandwidth = x.intra_bandwidth_gbs * 1e9
    expected = 2 * 7 / 8 * nbytes / bandwidth + 2 * 7 * x.intra_latency_us * 1e-6 + P.collective_overhead_us * 1e-6
    assert float(comm.allreduce_time_s(nbytes, group)) == pytest.approx(expected, rel=1e-12)
    # reduce-scatter and all-gather move half of that
    half = (expected - P.collective_overhead_us * 1e-6) / 2 + P.collective_overhead_us * 1e-6
    assert float(comm.reduce_scatter_time_s(nbytes, group)) == pytest.approx(half, rel=1e-12)


def test_allreduce_across_nodes_adds_the_network_term():
    x = inputs_from_job(make_job(hardware={"n_gpus": 32, "inter_node": "ib-ndr"}), P)
    group = comm.GroupLinks(32, 1.0, x, P)  # 8 per node, 4 nodes
    nbytes = 1e9
    per_gpu_net = x.inter_node_bandwidth_gbs / 8 * 1e9
    inter = 2 * 3 / 4 * (nbytes / 8) / per_gpu_net
    intra = 2 * 7 / 8 * nbytes / (x.intra_bandwidth_gbs * 1e9)
    latency = 2 * 7 * x.intra_latency_us * 1e-6 + 2 * 2 * x.inter_latency_us * 1e-6 + P.collective_overhead_us * 1e-6
    assert float(comm.allreduce_time_s(nbytes, group)) == pytest.approx(inter + intra + latency, rel=1e-12)


def test_a_single_rank_communicates_nothing():
    x = inputs_from_job(make_job(), P)
    assert float(comm.allreduce_time_s(1e9, comm.GroupLinks(1, 1.0, x, P))) == 0.0


@pytest.mark.parametrize("pp,vpp,micro", [(4, 1, 8), (4, 2, 8), (8, 1, 32), (2, 3, 6)])
def test_pipeline_bubble_is_p_minus_1_over_v_m_of_the_ideal(pp, vpp, micro):
    layers = 24
    job = make_job(hardware={"n_gpus": pp}, training={"pp": pp, "vpp": vpp, "global_batch": micro, "micro_batch": 1})
    est = estimate(job)
    parts = est.step_breakdown_s
    ideal = parts["compute"] + parts["launch_overhead"] + parts["tp_comm"]
    assert layers % (pp * vpp) == 0
    assert parts["pp_bubble"] / ideal == pytest.approx((pp - 1) / (vpp * micro), rel=1e-9)


JOBS = st.fixed_dictionaries({
    "gpus": st.sampled_from([8, 16, 32]),
    "tp": st.sampled_from([1, 2, 4]),
    "pp": st.sampled_from([1, 2]),
    "zero": st.integers(0, 3),
    "micro": st.sampled_from([1, 2]),
    "recompute": st.sampled_from(["none", "selective", "full"]),
    "accumulation": st.sampled_from([1, 4]),
})


def job_from(draw):
    dp = draw["gpus"] // (draw["tp"] * draw["pp"])
    return make_job(hardware={"n_gpus": draw["gpus"]},
                    training={"tp": draw["tp"], "pp": draw["pp"], "zero": draw["zero"], "micro_batch": draw["micro"],
                              "recompute": draw["recompute"],
                              "global_batch": dp * draw["micro"] * draw["accumulation"]})


@settings(max_examples=40, deadline=None)
@given(JOBS)
def test_overlap_never_makes_a_step_slower(draw):
    x = inputs_from_job(job_from(draw), P)
    with_overlap = float(evaluate(x, P).step_time_s)
    without = float(evaluate(x, P.with_overrides(dp_overlap_fraction=0.0)).step_time_s)
    assert with_overlap <= without * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(JOBS)
def test_a_faster_resource_never_makes_a_step_slower(draw):
    out = evaluate(doubled_resource_inputs(inputs_from_job(job_from(draw), P)), P)
    base, variants = out.step_time_s[0], out.step_time_s[1:]
    assert np.all(variants <= base * (1 + 1e-12))


def test_ten_gbe_makes_multi_node_data_parallel_7b_network_bound_and_nvlink_does_not():
    common = {"model": "llama2-7b", "training": {"seq_len": 4096, "global_batch": 256, "micro_batch": 2,
                                                   "recompute": "full", "zero": 1}}
    slow = estimate(make_job(model=common["model"], hardware={"n_gpus": 32, "inter_node": "eth-10g"},
                             training=common["training"]))
    fast = estimate(make_job(model=common["model"], hardware={"n_gpus": 32, "inter_node": "ib-ndr"},
                             training=common["training"]))
    node = estimate(make_job(model=common["model"], hardware={"n_gpus": 8}, training=common["training"]))
    assert slow.bottleneck == "inter_node"
    assert slow.step_breakdown_s["dp_comm"] > 0.5 * slow.step_time_s
    assert fast.step_time_s < slow.step_time_s / 2
    assert node.bottleneck == "compute"
    assert node.step_breakdown_s["dp_comm"] < 0.05 * node.step_time_s


TINY = {"n_layers": 2, "hidden": 256, "n_heads": 4, "ffn_hidden": 1024, "vocab": 1024}


def test_slow_storage_shows_as_the_bottleneck_when_the_data_rate_needs_it():
    # a tiny model consumes ~7·10^7 tokens/s per node (~280 MB/s of token ids): about what one
    # hard disk reads; a disk the probe measured at 30 MB/s makes loading most of the step
    training = {"seq_len": 1024, "global_batch": 8192, "micro_batch": 256}
    hdd = estimate(make_job(model=TINY, hardware={"storage": "hdd", "cpu_cores_per_node": 128}, training=training))
    assert hdd.bottleneck == "storage" and hdd.step_breakdown_s["data_loading"] > 0
    degraded = {"storage": "hdd", "cpu_cores_per_node": 128, "profile": {"storage_read_gbs": 0.03}}
    slow = estimate(make_job(model=TINY, hardware=degraded, training=training))
    assert slow.bottleneck == "storage"
    assert slow.step_breakdown_s["data_loading"] > 0.5 * slow.step_time_s
    nvme = estimate(make_job(model=TINY, hardware={"storage": "nvme-gen4", "cpu_cores_per_node": 128},
                             training=training))
    assert nvme.step_breakdown_s["data_loading"] == 0 and nvme.bottleneck != "storage"


def test_too_few_cpu_cores_for_tokenizing_on_the_fly_show_as_the_bottleneck():
    small_fast_model = TINY
    job = make_job(model=small_fast_model, hardware={"storage": "nvme-gen4", "cpu_cores_per_node": 12},
                   training={"seq_len": 2048, "global_batch": 2048, "micro_batch": 32, "data_format": "text"})
    est = estimate(job)
    assert est.bottleneck == "cpu"
    enough = estimate(make_job(model=small_fast_model, hardware={"storage": "nvme-gen4", "cpu_cores_per_node": 12},
                               training={"seq_len": 2048, "global_batch": 2048, "micro_batch": 32}))
    assert enough.step_time_s < est.step_time_s


def test_vectorized_rows_equal_single_estimates():
    jobs = [make_job(training={"tp": tp, "zero": z, "recompute": r, "global_batch": 64})
            for tp in (1, 2, 8) for z in (0, 3) for r in ("none", "full")]
    stacked = evaluate(stack_inputs([inputs_from_job(j, P) for j in jobs]), P)
    for i, job in enumerate(jobs):
        single = estimate(job)
        assert stacked.step_time_s[i] == pytest.approx(single.step_time_s, rel=1e-12)
        assert stacked.memory_bytes[i] / 2**30 == pytest.approx(single.memory_per_gpu_gib, rel=1e-12)


def test_estimate_json_has_every_contract_key_and_parts_sum_to_the_step():
    est = estimate(make_job(training={"tokens": 1e11}), price_usd_per_gpu_hour=2.0)
    data = est.to_dict()
    assert set(data) >= CONTRACT_KEYS
    assert {"weights", "gradients", "optimizer", "activations", "other"} <= set(data["memory_breakdown_gib"])
    assert {"compute", "tp_comm", "pp_bubble", "dp_comm", "data_loading", "host_transfer", "other"} <= set(
        data["step_breakdown_s"])
    assert sum(data["step_breakdown_s"].values()) == pytest.approx(data["step_time_s"], rel=1e-12)
    assert data["gpu_hours"] == pytest.approx(data["total_time_s"] * 8 / 3600)
    assert data["cost_usd"] == pytest.approx(data["gpu_hours"] * 2.0)


def test_without_tokens_or_price_total_and_cost_are_null():
    data = estimate(make_job()).to_dict()
    assert data["total_time_s"] is None and data["gpu_hours"] is None and data["cost_usd"] is None


def test_a_profile_with_a_lower_measured_gemm_rate_lengthens_compute():
    datasheet = estimate(make_job())
    measured = {"gemm_tflops": {"bf16": 400.0}, "memory_bandwidth_gbs": 2800.0}
    slow = estimate(make_job(hardware={"profile": measured}))
    assert slow.step_breakdown_s["compute"] > datasheet.step_breakdown_s["compute"] * 1.3
    fast = estimate(make_job(hardware={"profile": {"gemm_tflops": {"bf16": 900.0}}}))
    assert fast.step_breakdown_s["compute"] < slow.step_breakdown_s["compute"]


def test_power_capped_gpu_is_slower_and_says_so():
    capped = make_job(hardware={"gpu": {"base": "H100-SXM5-80GB", "tdp_w": 500}})
    assert any("500 W" in note for note in capped.notes)
    assert estimate(capped).step_time_s > estimate(make_job()).step_time_s


def test_estimate_is_pure_and_repeatable():
    job = make_job()
    assert estimate(job).to_dict() == estimate(job).to_dict()


def test_a_profile_of_a_healthy_gpu_keeps_the_catalog_rates_and_a_slow_one_scales_them():
    # the probe's health expectation beside its measurement (HardwareProfile.gemm_expected_tflops)
    def profile(measured):
        return {"gpu_catalog_id": "H100-SXM5-80GB", "gemm_tflops": {"bf16": measured},
                "gemm_expected_tflops": {"bf16": 686.4}}

    datasheet = estimate(make_job())
    healthy = estimate(make_job(hardware={"profile": profile(686.4)}))
    assert healthy.step_time_s == pytest.approx(datasheet.step_time_s, rel=1e-12)
    slow = estimate(make_job(hardware={"profile": profile(343.2)}))
    assert slow.step_breakdown_s["compute"] > 1.6 * datasheet.step_breakdown_s["compute"]
    # measured on another GPU type: its expectation says nothing about this one (the measured rate is used)
    other = {**profile(686.4), "gpu_catalog_id": "A100-SXM4-80GB"}
    assert estimate(make_job(hardware={"profile": other})).step_time_s != pytest.approx(datasheet.step_time_s)
