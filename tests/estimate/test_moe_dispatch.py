"""MoE token dispatchers (`training.moe_dispatcher`) and Megatron-Core's paired micro-batches
(`training.moe_a2a_overlap`), counted by hand on small MoE models."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate import collectives as comm
from trainrig.estimate import traffic
from trainrig.estimate.core import _gemm_times_s
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

MOE = {"n_layers": 4, "hidden": 256, "n_heads": 4, "ffn_hidden": 512, "vocab": 1000, "n_experts": 8, "top_k": 2}
TWO_NODES = {"n_gpus": 8, "gpus_per_node": 4, "inter_node": {"bandwidth_gbps": 400, "ports_per_node": 4}}


def job(model=None, hardware=None, **training):
    settings = {"seq_len": 1024, "global_batch": 16, "framework": "megatron", **training}
    return make_job(model={**MOE, **(model or {})}, hardware=hardware, training=settings)


def dispatch_s(j, tokens=1024.0):
    x = inputs_from_job(j, P)
    group = comm.GroupLinks(x.ep, x.etp * x.cp, x, P)
    return float(traffic._dispatch_s(x, group, tokens)), x, group


def test_holding_share_is_the_chance_a_token_routes_to_some_held_expert():
    x = inputs_from_job(job(ep=4), P)  # 8 experts, top 2
    # 2 of the 8 experts held: 1 − C(6, 2)/C(8, 2) = 1 − 15/28
    assert float(traffic._holding_share(x, 2.0)) == pytest.approx(13 / 28)
    assert float(traffic._holding_share(x, 8.0)) == pytest.approx(1.0)


def test_deepep_on_one_node_sends_a_token_once_per_gpu_holding_its_experts():
    # ep 4 on one node, 2 experts per GPU, top 2: a token reaches 4 · 13/28 GPUs on average, of
    # which 1 in 4 is its own; the all-to-all sends 2 · 3/4 copies (one per routed expert)
    deduplicated, x, group = dispatch_s(job(ep=4, moe_dispatcher="deepep"))
    token_bytes = 1024 * 256 * 2
    assert deduplicated == pytest.approx(float(comm.copies_time_s(token_bytes, 4 * 13 / 28 * 3 / 4, 0.0, group)))
    per_expert, _, _ = dispatch_s(job(ep=4))
    assert per_expert == pytest.approx(float(comm.copies_time_s(token_bytes, 2 * 3 / 4, 0.0, group)))
    assert deduplicated < per_expert


def test_deepep_across_nodes_sends_a_token_once_per_other_node():
    # ep 8 over 2 nodes of 4, 16 experts (8 per node, 2 per GPU), top 4
    model = {"n_experts": 16, "top_k": 4}
    deduplicated, x, group = dispatch_s(job(model, TWO_NODES, ep=8, moe_dispatcher="deepep"))
    assert float(group.nodes) == 2 and float(group.ranks_per_node) == 4
    remote = 1 - (8 * 7 * 6 * 5) / (16 * 15 * 14 * 13)  # the other node holds one of its experts
    gpus = 8 * (1 - (14 * 13 * 12 * 11) / (16 * 15 * 14 * 13))  # GPUs holding one of its experts
    token_bytes = 1024 * 256 * 2
    assert deduplicated == pytest.approx(float(comm.copies_time_s(token_bytes, gpus * 3 / 4, remote, group)))
    # the all-to-all sends half its 4 copies over the network, 4 times DeepEP's ~0.96
    per_expert, _, _ = dispatch_s(job(model, TWO_NODES, ep=8))
    assert per_expert == pytest.approx(float(comm.copies_time_s(token_bytes, 4 * 3 / 8, 4 * 4 / 8, group)))
    hybrid, _, _ = dispatch_s(job(model, TWO_NODES, ep=8, moe_dispatcher="hybridep"))
    assert hybrid == deduplicated


def test_allgather_gathers_every_ranks_tokens():
    gathered, x, group = dispatch_s(job(ep=4, moe_dispatcher="allgather"))
    assert gathered == pytest.approx(float(comm.all_gather_time_s(1024 * 256 * 2 * 4, group)))


def test_pairing_hides_the_exchanges_but_for_the_unpaired_passes():
    # a long sequence makes the layer's compute far outlast its exchanges: a paired layer shows
    # only the compute the communication kernels' SMs take, sm_share × its 4 exchanges
    plain = job(ep=4, global_batch=32, seq_len=4096)
    paired = job(ep=4, global_batch=32, seq_len=4096, moe_a2a_overlap=True)
    x = inputs_from_job(paired, P)
    tokens = float(x.micro_batch * x.seq_len)
    gemm = _gemm_times_s(x, P)
    one = float(traffic._dispatch_s(x, comm.GroupLinks(x.ep, x.etp * x.cp, x, P), tokens))
    assert 2 * one < float(gemm["moe_mlp"][0] + gemm["moe_mlp"][1])
    assert one < float(gemm["attention"][0] + gemm["attention_core"][0])
    sm_share = P.ep_overlap_comm_sms / float(x.compute_units)
    m = float(x.micro_batches)  # 32 / (dp 2 × 1) = 16: all but the first forward and last backward paired
    assert float(traffic._paired_share(x)) == pytest.approx(1 - 1 / m)
    exposed, unpaired = traffic.expert_parallel_s(x, P, tokens, gemm)
    assert float(unpaired) == pytest.approx(4 * 4 * one)  # 4 layers × 4 exchanges
    assert float(exposed) == pytest.approx(4 * ((1 - 1 / m) * 4 * one * sm_share + 4 * one / m))
    faster = estimate(paired, advise_fit=False)
    slower = estimate(plain, advise_fit=False)
    assert faster.step_breakdown_s["ep_comm"] == pytest.approx(m * float(exposed))
    assert faster.step_time_s < slower.step_time_s


def test_pairing_exposes_what_outlasts_the_other_passes_compute():
    # each of the three windows shows max(0, comm − compute) plus the SMs taken beside it
    x = inputs_from_job(job(ep=4, moe_a2a_overlap=True), P)
    gemm = {"attention": (1.0, 2.0, 0.0), "attention_core": (0.5, 1.0), "moe_mlp": (1.0, 2.0, 0.0)}
    sm_share = P.ep_overlap_comm_sms / float(x.compute_units)
    one = 2.0  # beside attention forward (1.5) and backward (3.0); two beside the experts (3.0)
    expected = (0.5 + sm_share * 1.5) + (1.0 + sm_share * 3.0) + (0.0 + sm_share * 2.0)
    assert float(traffic._paired_exposed_s(x, P, one, gemm)) == pytest.approx(expected)


def test_an_interleaved_pipeline_pairs_only_its_steady_state():
    # pp 4 × vpp 2, 16 micro-batches: the first stage warms up with 2·3 + 1·4 + 1 = 11 forward chunks
    j = job(hardware={"n_gpus": 4}, ep=1, pp=4, vpp=2, global_batch=16, model={"n_layers": 8})
    x = inputs_from_job(j, P)
    assert float(traffic._paired_share(x)) == pytest.approx(1 - 11 / 32)


def test_the_pipeline_bubble_keeps_the_unpaired_exchanges():
    hardware = {"n_gpus": 8}
    plain = estimate(job(hardware=hardware, ep=4, pp=2, vpp=2, global_batch=16), advise_fit=False)
    paired = estimate(job(hardware=hardware, ep=4, pp=2, vpp=2, global_batch=16, moe_a2a_overlap=True),
                      advise_fit=False)
    assert paired.step_breakdown_s["ep_comm"] < plain.step_breakdown_s["ep_comm"]
    # (pp − 1)/vpp micro-batches of idle time, each with its exchanges all exposed (the plain run's)
    parts, m = paired.step_breakdown_s, paired.config["grad_accum"]
    per_micro = sum(parts[k] for k in ("compute", "launch_overhead", "tp_comm", "cp_comm")) / m
    unpaired = plain.step_breakdown_s["ep_comm"] / m
    assert parts["pp_bubble"] == pytest.approx((2 - 1) / 2 * (per_micro + unpaired))


@pytest.mark.parametrize("training, said", [
    ({"ep": 1}, "ep > 1"),
    ({"ep": 4, "recompute": "full"}, "full recompute"),
    ({"ep": 4, "recompute_modules": ["moe"]}, "full recompute or a recomputed moe"),
    ({"ep": 4, "pp": 2, "global_batch": 16}, "give vpp > 1"),
    ({"ep": 4, "moe_dispatcher": "allgather"}, "not allgather"),
])
def test_megatron_core_rules_for_pairing(training, said):
    with pytest.raises(TrainrigError) as error:
        job(moe_a2a_overlap=True, **training)
    assert error.value.field == "training.moe_a2a_overlap" and said in str(error.value)
    with pytest.raises(TrainrigError):
        job({"n_experts": 0, "top_k": 0}, moe_a2a_overlap=True)


def test_the_estimate_names_the_dispatch_and_the_config_carries_it():
    result = estimate(job(ep=4), advise_fit=False)
    assert result.config["moe_dispatcher"] == "alltoall" and result.config["moe_a2a_overlap"] is False
    assert any("a copy per routed expert (moe_dispatcher: alltoall, the default)" in line
               for line in result.assumptions)
    given = estimate(job(ep=4, moe_dispatcher="deepep", moe_a2a_overlap=True), advise_fit=False)
    line = next(line for line in given.assumptions if line.startswith("MoE tokens"))
    assert "DeepEP" in line and "the default" not in line and "moe_a2a_overlap: true" in line
    warned = estimate(job(ep=1, moe_dispatcher="deepep"), advise_fit=False)
    assert any("moe_dispatcher: deepep has no effect" in w for w in warned.warnings)
