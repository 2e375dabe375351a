"""Overlap of TP, CP and DP communication with compute (issue 12): first-principles effects."""

from __future__ import annotations

import numpy as np
import pytest

from jobs import GPT_LAYER, make_job
from trainrig import estimate, load_model
from trainrig.errors import TrainrigError
from trainrig.estimate import collectives as comm
from trainrig.estimate.core import evaluate
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P
from trainrig.plan.space import SearchSpace, enumerate_layouts

LLAMA_8B = "llama3-8b"
TP8 = {"tp": 8, "sequence_parallel": True}


def _tp_comm(job, params=P):
    return float(evaluate(inputs_from_job(job, params), params).step_parts_s["tp_comm"])


# ---- collectives: NCCL's ring latency -----------------------------------------------------------


def test_reduce_scatter_across_nodes_pays_every_ring_step_as_nccl_models_it():
    x = inputs_from_job(make_job(hardware={"n_gpus": 32, "inter_node": "ib-ndr"}), P)
    group = comm.GroupLinks(32, 1.0, x, P)  # 8 per node, 4 nodes
    nbytes = 1e9
    bandwidth = 7 / 8 * nbytes / (x.intra_bandwidth_gbs * 1e9) + 3 / 4 * (nbytes / 8) / (
        x.inter_node_bandwidth_gbs / 8 * 1e9)
    # 31 ring steps: 3 cross the network, 28 stay inside a node (NCCL tuning.cc nInterSteps = nNodes − 1)
    latency = 28 * x.intra_latency_us * 1e-6 + 3 * x.inter_latency_us * 1e-6
    expected = bandwidth + latency + P.collective_overhead_us * 1e-6
    assert float(comm.reduce_scatter_time_s(nbytes, group)) == pytest.approx(expected, rel=1e-12)
    assert float(comm.all_gather_time_s(nbytes, group)) == pytest.approx(expected, rel=1e-12)


def test_small_messages_take_a_low_latency_protocol_and_large_ones_simple():
    x = inputs_from_job(make_job(hardware={"n_gpus": 32, "inter_node": "ib-ndr"}), P)
    group = comm.GroupLinks(32, 1.0, x, P)

    def simple(nbytes):  # Simple protocol: every hop at the links' latency, full bus bandwidth
        bandwidth = 7 / 8 * nbytes / (x.intra_bandwidth_gbs * 1e9) + 3 / 4 * (nbytes / 8) / (
            x.inter_node_bandwidth_gbs / 8 * 1e9)
        return bandwidth + (28 * x.intra_latency_us + 3 * x.inter_latency_us) * 1e-6 + P.collective_overhead_us * 1e-6

    assert float(comm.reduce_scatter_time_s(64e3, group)) < 0.5 * simple(64e3)  # LL's hops are ~4× shorter
    assert float(comm.reduce_scatter_time_s(4e9, group)) == pytest.approx(simple(4e9), rel=1e-12)


def test_ring_latency_grows_with_the_group_but_allreduce_can_take_the_tree():
    small = inputs_from_job(make_job(hardware={"n_gpus": 16, "inter_node": "ib-ndr"}), P)
    large = inputs_from_job(make_job(hardware={"n_gpus": 2048, "inter_node": "ib-ndr"},
                                     training={"global_batch": 2048}), P)
    rs_small = float(comm.reduce_scatter_time_s(1e6, comm.GroupLinks(16, 1.0, small, P)))
    rs_large = float(comm.reduce_scatter_time_s(1e6, comm.GroupLinks(2048, 1.0, large, P)))
    assert rs_large > 50 * rs_small  # 2,047 ring steps against 15
    # an all-reduce of the same small message uses the tree: logarithmic in the node count
    ar_large = float(comm.allreduce_time_s(1e6, comm.GroupLinks(2048, 1.0, large, P)))
    assert ar_large < rs_large


# ---- tensor parallelism -------------------------------------------------------------------------


def test_tp_overlap_needs_sequence_parallelism():
    with pytest.raises(TrainrigError) as error:
        make_job(training={"tp": 8, "tp_comm_overlap": True})
    assert error.value.field == "training.tp_comm_overlap"
    assert error.value.message.count(". ") == 0 and "sequence_parallel" in error.value.message


def test_tp_overlap_hides_most_of_the_traffic_of_an_nvlink_tp8_layer():
    model = load_model(LLAMA_8B).model_dump()
    off = _tp_comm(make_job(model, training={**TP8, "seq_len": 8192, "global_batch": 8}))
    on = _tp_comm(make_job(model, training={**TP8, "seq_len": 8192, "global_batch": 8, "tp_comm_overlap": True}))
    assert 0 < on < 0.6 * off


@pytest.mark.parametrize("gpu,link", [("H100-SXM5-80GB", None), ("L40S", "pcie4-x16"), ("A100-SXM4-80GB", None)])
def test_tp_overlap_never_hides_more_than_the_gemms_it_runs_beside(gpu, link):
    hardware = {"gpu": gpu, **({"intra_node": link} if link else {})}
    training = {**TP8, "global_batch": 8}
    off = estimate(make_job(hardware=hardware, training=training))
    on = estimate(make_job(hardware=hardware, training={**training, "tp_comm_overlap": True}))
    hidden = off.step_breakdown_s["tp_comm"] - on.step_breakdown_s["tp_comm"]
    assert hidden <= on.step_breakdown_s["compute"]
    assert on.step_breakdown_s["compute"] == pytest.approx(off.step_breakdown_s["compute"], rel=1e-12)


def test_without_sm_sharing_overlap_exposes_less_once_messages_are_past_the_latency_regime():
    free = P.with_overrides(tp_overlap_comm_sms=0.0)
    for model, mb in ((None, 8), (load_model(LLAMA_8B).model_dump(), 1)):
        training = {**TP8, "global_batch": 8 * mb, "micro_batch": mb, "seq_len": 4096}
        off = _tp_comm(make_job(model, training=training), free)
        on = _tp_comm(make_job(model, training={**training, "tp_comm_overlap": True}), free)
        assert on < off


def test_pipelining_a_tiny_layer_pays_each_pieces_latency():
    """A 2,048-token micro-batch of a 2,048-wide layer moves 8 MB per collective: cut into 4
    reduce-scatters, each pays the ring's hops again, so overlap can lose even with SMs to spare."""
    free = P.with_overrides(tp_overlap_comm_sms=0.0)
    training = {**TP8, "global_batch": 8}
    off = _tp_comm(make_job(training=training), free)
    on = _tp_comm(make_job(training={**training, "tp_comm_overlap": True}), free)
    assert on > off


def test_sm_sharing_costs_the_gemms_it_runs_beside():
    job = make_job(training={**TP8, "tp_comm_overlap": True})
    less = _tp_comm(job, P.with_overrides(tp_overlap_comm_sms=4.0))
    more = _tp_comm(job, P.with_overrides(tp_overlap_comm_sms=32.0))
    assert more > less


def test_tp_overlap_off_is_todays_exposed_allreduce_count():
    job = make_job(training=TP8)
    x = inputs_from_job(job, P)
    tokens = x.micro_batch * x.seq_len
    per = float(comm.allreduce_time_s(tokens * x.hidden * x.activation_bytes, comm.GroupLinks(8, 1.0, x, P)))
    assert _tp_comm(job) == pytest.approx(x.micro_batches * GPT_LAYER["n_layers"] * 4 * per, rel=1e-12)


# ---- context parallelism ------------------------------------------------------------------------


def test_ulysses_needs_the_heads_per_tp_rank_divisible_by_cp():
    with pytest.raises(TrainrigError) as error:  # 16 heads over tp 4 = 4 per rank; cp 8 does not divide them
        make_job(hardware={"n_gpus": 32, "inter_node": "ib-ndr"},
                 training={"tp": 4, "cp": 8, "cp_kind": "ulysses", "global_batch": 8})
    assert error.value.field == "training.cp_kind"
    assert "ring or all-gather" in error.value.message


def _cp_comm(kind, network="eth-100g"):
    job = make_job(hardware={"n_gpus": 16, "inter_node": network},
                   training={"cp": 16, "cp_kind": kind, "seq_len": 16384, "global_batch": 4})
    return estimate(job).step_breakdown_s["cp_comm"]


def test_ring_hides_more_context_parallel_traffic_than_an_all_gather_and_ulysses_hides_none():
    ring, gathered, ulysses = _cp_comm("ring"), _cp_comm("all-gather"), _cp_comm("ulysses")
    assert ring <= gathered
    assert gathered > 0 and ulysses > 0
    # Ulysses' all-to-alls are all exposed: a faster network shows fully in its cp_comm
    assert _cp_comm("ulysses", "ib-xdr") < ulysses


# ---- data parallelism ---------------------------------------------------------------------------


def _fsdp(n_gpus, micro_batch=1, seq_len=4096):
    model = load_model(LLAMA_8B).model_dump()
    return estimate(make_job(model, hardware={"n_gpus": n_gpus, "inter_node": "ib-ndr"},
                             training={"zero": 3, "seq_len": seq_len, "micro_batch": micro_batch,
                                       "global_batch": n_gpus * micro_batch}))


def test_fsdp_exposure_grows_with_the_group_at_fixed_work_per_gpu():
    exposed = [_fsdp(n).step_breakdown_s["dp_comm"] for n in (16, 128, 1024)]
    assert exposed[0] < exposed[1] < exposed[2]
    # the compute per GPU is the same, so the step grows only through the traffic
    steps = [_fsdp(n).step_time_s for n in (16, 1024)]
    assert steps[1] > steps[0]


def test_fsdp_of_an_8b_on_one_nvlink_node_hides_its_traffic():
    est = _fsdp(8, micro_batch=2, seq_len=8192)
    assert 0 < est.step_breakdown_s["dp_comm"] < 0.01 * est.step_time_s


def test_the_last_gradient_bucket_never_hides():
    job = make_job(hardware={"n_gpus": 16, "inter_node": "ib-ndr"}, training={"zero": 0, "global_batch": 64})
    x = inputs_from_job(job, P)
    bucket = P.dp_bucket_mb * 2.0**20
    one = float(comm.allreduce_time_s(bucket, comm.GroupLinks(16, 1.0, x, P)))
    exposed = float(evaluate(x, P).step_parts_s["dp_comm"])
    assert exposed >= 0.5 * one  # the last of equal buckets, each at most dp_bucket_mb
    assert exposed > 0


# ---- what the estimate says it assumed, and the planner ----------------------------------------


def test_the_overlap_assumptions_are_in_the_json():
    job = make_job(hardware={"n_gpus": 16, "inter_node": "ib-ndr"}, training={**TP8, "cp": 2, "global_batch": 8})
    said = " | ".join(estimate(job).to_dict()["assumptions"])
    assert "tp_comm_overlap: false" in said
    assert "cp_kind: ring" in said
    assert "data-parallel traffic" in said  # the cp ranks reduce gradients together
    said = " | ".join(estimate(make_job(training=TP8)).to_dict()["assumptions"])
    assert "data-parallel traffic" not in said and "cp_kind" not in said  # dp·cp = 1: nothing to say
    said = " | ".join(estimate(make_job(training={**TP8, "tp_comm_overlap": True, "tp": 2})).to_dict()["assumptions"])
    assert "tp_comm_overlap: true" in said and "data-parallel traffic" in said


def test_the_planner_tries_tp_overlap_only_with_sequence_parallel_tp():
    spec = load_model(LLAMA_8B)
    both = enumerate_layouts(spec, 16, 8, 4096, (64,), SearchSpace(tp_comm_overlap=(False, True)))
    on = both.tp_comm_overlap > 0
    assert np.any(on)
    assert np.all(both.sequence_parallel[on] > 0) and np.all(both.tp[on] > 1)
    never = enumerate_layouts(spec, 16, 8, 4096, (64,), SearchSpace(tp_comm_overlap=(False,)))
    assert not np.any(never.tp_comm_overlap) and len(both) > len(never)


@pytest.mark.parametrize("mapping", [
    {"model": "llama3-8b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 8}},
    {"model": "llama3-70b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 64, "inter_node": "ib-ndr"}},
], ids=["one node", "eight nodes"])
def test_a_ring_takes_its_fastest_protocol_whichever_path_times_it(mapping):
    """Past the size where Simple beats LL128 and LL in every row, _ring_s times Simple alone; at any
    size, in rows or one number, it equals the fastest of NCCL's three protocols."""
    x = inputs_from_job(make_job(load_model(mapping["model"]).model_dump(), mapping["hardware"]), P)
    group = comm.GroupLinks(x.gpus_per_node * x.n_nodes, 1.0, x, P)
    intra = (group.size - group.nodes) * group.intra_latency_s
    inter = float(comm.ring_steps(group.nodes) * group.inter_latency_s) if group.nodes > 1 else 0.0

    def fastest(bandwidth_s):
        return min(bandwidth_s / bw + intra * a + inter * b for a, b, bw in comm.RING_PROTOCOLS)

    sizes = np.geomspace(1e-9, 1.0, 60)  # from latency-bound to bandwidth-bound
    for rows in (sizes, sizes[40:], sizes[:5]):
        timed = comm._ring_s(rows, group)
        assert np.allclose(timed, [fastest(s) for s in rows], rtol=1e-15, atol=0), rows[0]
        assert all(float(comm._ring_s(float(s), group)) == pytest.approx(fastest(s), rel=1e-15) for s in rows)


def _zero1_dp_comm_s(framework, n_gpus, **values):
    model = load_model(LLAMA_8B).model_dump()
    job = make_job(model, hardware={"n_gpus": n_gpus, "inter_node": "ib-ndr"},
                   training={"framework": framework, "zero": 1, "seq_len": 4096, "global_batch": 2 * n_gpus})
    x = inputs_from_job(job, P)
    return float(evaluate(x.with_values(**values) if values else x, P).step_parts_s["dp_comm"])


def test_megatron_buckets_grow_with_the_data_parallel_group():
    # max(4e7, 1e6 · dp): at dp 8 the floor holds, so the growth rule changes nothing
    assert _zero1_dp_comm_s("megatron", 8) == _zero1_dp_comm_s("megatron", 8, dp_bucket_elements_per_rank=0.0)
    # at dp 256 a fixed 4e7 bucket cuts the 8B model into ~200 collectives, each paying the ring's latency
    # over 256 ranks; buckets of 2.56e8 elements pay it ~32 times
    grown, fixed = _zero1_dp_comm_s("megatron", 256), _zero1_dp_comm_s("megatron", 256, dp_bucket_elements_per_rank=0.0)
    assert grown < fixed


def test_overlapped_param_gather_hides_under_the_first_forward_but_not_its_first_bucket():
    exposed = _zero1_dp_comm_s("megatron", 64)
    overlapped = _zero1_dp_comm_s("megatron", 64, dp_param_gather_overlap=1.0)
    assert 0 < overlapped < exposed
    # NeMo and Megatron-Bridge overlap it, in fixed buckets of 128·2^20 parameters
    as_nemo = _zero1_dp_comm_s("megatron", 64, dp_param_gather_overlap=1.0, dp_bucket_elements=128 * 2.0**20,
                               dp_bucket_elements_per_rank=0.0)
    assert _zero1_dp_comm_s("nemo", 64) == pytest.approx(as_nemo, rel=1e-12)
    assert as_nemo != overlapped


def test_the_bucket_rule_and_the_gather_overlap_are_named():
    model = load_model(LLAMA_8B).model_dump()

    def said(framework):
        job = make_job(model, hardware={"n_gpus": 16, "inter_node": "ib-ndr"},
                       training={"framework": framework, "zero": 1, "global_batch": 32})
        return " | ".join(estimate(job).to_dict()["assumptions"])

    assert "1e+06 × dp·cp" in said("megatron") and "after the optimizer step, exposed" in said("megatron")
    assert "overlap_param_gather" in said("nemo") and "1.34e+08 elements" in said("nemo")


def test_async_tp_sends_the_summed_input_gradients_of_separate_linears_exposed():
    """torchtitan's async TP (micro-pipeline TP) fuses a reduce-scatter only into the one matmul it
    scatters. Llama's q/k/v and gate/up are separate linears there, so the backward's two input-
    gradient reduce-scatters per layer go out plain: against Transformer Engine's bulk overlap on the
    same job, the TP time grows by what bulk hid, and exactly two exposed reduce-scatters per layer
    and pass remain. Fused linears pipeline theirs beside their own input-gradient GEMM instead."""
    model = load_model(LLAMA_8B).model_dump()
    training = {**TP8, "seq_len": 8192, "global_batch": 8, "tp_comm_overlap": True, "framework": "torchtitan"}
    job = make_job(model, training=training)
    x = inputs_from_job(job, P)
    userbuffers = x.with_values(tp_overlap_micro_pipeline=0.0)
    micro = float(evaluate(x, P).step_parts_s["tp_comm"])
    te = float(evaluate(userbuffers, P).step_parts_s["tp_comm"])
    assert micro > te
    exposed_off = float(evaluate(x.with_values(tp_comm_overlap=0.0), P).step_parts_s["tp_comm"])
    assert micro < exposed_off
    # what grows is two plain reduce-scatters per layer, less the bulk overlap's share of them
    group = comm.GroupLinks(8, 1.0, x, P)
    plain = float(comm.reduce_scatter_time_s(x.micro_batch * 8192 * x.hidden * 2, group))
    per_step = float(x.n_layers * x.micro_batches)  # layers × micro-batches
    assert micro - te <= 2 * per_step * plain * (1 + 1e-9)
    assert micro - te >= 0.5 * per_step * plain
    # with q/k/v and gate/up fused, each is one matmul and its scatter pipelines beside it
    fused = x.with_values(fused_qkv=1.0, fused_gate_up=1.0)
    fused_te = fused.with_values(tp_overlap_micro_pipeline=0.0)
    fused_micro_s = float(evaluate(fused, P).step_parts_s["tp_comm"])
    assert fused_micro_s < micro
    assert fused_micro_s < 2 * float(evaluate(fused_te, P).step_parts_s["tp_comm"])


def test_async_tp_is_named_for_torchtitan():
    training = {**TP8, "global_batch": 8, "tp_comm_overlap": True}
    titan = estimate(make_job(training={**training, "framework": "torchtitan"}), advise_fit=False).assumptions
    mcore = estimate(make_job(training={**training, "framework": "megatron"}), advise_fit=False).assumptions
    assert any("async (micro-pipeline) TP" in a for a in titan)
    assert not any("async (micro-pipeline) TP" in a for a in mcore)
    assert any("userbuffers" in a for a in mcore)


def test_torchtitan_context_parallelism_defaults_to_its_all_gather_rotation():
    """torchtitan's context_parallel_rotate_method defaults to allgather: a job that names the
    framework and no cp_kind gets it, and says so; a stated cp_kind and other frameworks keep theirs."""
    training = {"seq_len": 32768, "cp": 2, "global_batch": 8, "framework": "torchtitan"}
    titan = make_job(load_model(LLAMA_8B).model_dump(), training=training)
    assert titan.training.cp_kind == "all-gather"
    said = estimate(titan, advise_fit=False).assumptions
    assert any("cp_kind: all-gather, torchtitan's default" in a for a in said)
    ring = make_job(load_model(LLAMA_8B).model_dump(), training={**training, "cp_kind": "ring"})
    assert ring.training.cp_kind == "ring"
    plain = make_job(load_model(LLAMA_8B).model_dump(), training={**training, "framework": "megatron"})
    assert plain.training.cp_kind == "ring"
    # without context parallelism the default is silent
    alone = estimate(make_job(load_model(LLAMA_8B).model_dump(), training={**training, "cp": 1}), advise_fit=False)
    assert not any("cp_kind" in w for w in alone.warnings)
