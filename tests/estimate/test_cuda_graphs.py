"""CUDA graphs (`training.cuda_graph_scope`): the kernels a graph captures cost the host one launch
per graph and pass instead of one each, counted by hand on a Llama-style layer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate import host_issue
from trainrig.estimate.core import _micro_batch
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

# q/k/v in one linear, gate and up in one, rotary: per layer's forward the attention block is
# q/k/v, o, attention, input norm, rotary on q and k, residual add (7 kernels); the MLP block
# gate/up, down, norm, activation, residual add (5)
LLAMA = {"n_layers": 8, "hidden": 1024, "n_heads": 8, "ffn_hidden": 2816, "vocab": 32000, "gated_mlp": True,
         "fused_qkv": True, "fused_gate_up": True, "position_embedding": "rope"}
MOE = {**LLAMA, "n_experts": 8, "top_k": 2, "expert_ffn_hidden": 1408}


def job(model=LLAMA, **training):
    settings = {"seq_len": 1024, "global_batch": 8, "framework": "megatron", **training}
    return make_job(model=model, hardware={"n_gpus": 1, "gpus_per_node": 1}, training=settings)


def kernels_issued(j):
    """Kernels the host launches per layer and pass (the embedding and head's 8 and 12 apart; small
    eager ops, such as an MoE router's, left out)."""
    kernels_only = replace(P, eager_op_host_us=0.0)
    x = inputs_from_job(j, kernels_only)
    forward_s, backward_s = host_issue.host_issue_s(x, kernels_only)
    launch_s, layers = float(x.kernel_launch_us) * 1e-6, float(x.layers_per_stage)
    return (float(forward_s) / launch_s - 8) / layers, (float(backward_s) / launch_s - 12) / layers


def small_ops_issued(j):
    """Small eager ops the host issues per layer in the forward (Megatron's MoE router and dispatcher)."""
    x = inputs_from_job(j, P)
    forward_s, _ = host_issue.host_issue_s(x, P)
    return (float(forward_s) - float(host_issue.host_issue_s(x, replace(P, eager_op_host_us=0.0))[0])) / (
        P.eager_op_host_us * 1e-6 * float(x.layers_per_stage))


def test_the_layer_counts_split_into_attention_and_mlp_blocks():
    forward, backward = kernels_issued(job())
    assert forward == pytest.approx(7 + 5)
    assert backward == pytest.approx(12 + 4 + 1)  # every gradient, 4 weight gradients, attention's 2nd


def test_a_captured_block_is_one_launch_per_pass():
    _, backward = kernels_issued(job())
    forward_attn, backward_attn = kernels_issued(job(cuda_graph_scope=["attn"]))
    assert forward_attn == pytest.approx(5 + 1)
    assert backward_attn == pytest.approx(backward * 5 / 12 + 1)  # the backward's captured share is the forward's
    assert kernels_issued(job(cuda_graph_scope=["layer"])) == pytest.approx((1.0, 1.0))
    assert kernels_issued(job(cuda_graph_scope=["attn", "mlp"])) == pytest.approx((1.0, 1.0))


def test_the_router_scope_leaves_the_dispatch_and_experts_eager():
    # an MoE layer adds 8 kernels (router GEMM, top-k, permutations, grouped GEMMs); moe_router
    # captures its norm, router GEMM and top-k with the attention block: 7 + 3 in one graph
    plain, _ = kernels_issued(job(MOE))
    assert plain == pytest.approx(7 + 5 + 8)
    routed, _ = kernels_issued(job(MOE, cuda_graph_scope=["attn", "moe_router", "moe_preprocess"]))
    assert routed == pytest.approx(plain - 10 + 1)
    whole, _ = kernels_issued(job(MOE, cuda_graph_scope=["moe"]))
    assert whole == pytest.approx(plain - 13 + 1)


def test_graphs_capture_the_routers_small_ops_and_the_moe_scope_all_of_them():
    # Megatron-Core's MoE layer beside its kernels: the router's 28, the dispatcher's 20, 2 per local expert (8)
    assert small_ops_issued(job(MOE)) == pytest.approx(28 + 20 + 2 * 8)
    assert small_ops_issued(job(MOE, cuda_graph_scope=["attn", "moe_router"])) == pytest.approx(20 + 2 * 8)
    assert small_ops_issued(job(MOE, cuda_graph_scope=["moe"])) == pytest.approx(0.0, abs=1e-9)


def test_full_iteration_launches_the_step_once():
    x = inputs_from_job(job(cuda_graph_scope=["full_iteration"]), P)
    forward_s, backward_s = host_issue.host_issue_s(x, P)
    assert float(forward_s) == pytest.approx(float(x.kernel_launch_us) * 1e-6 / 8)  # one launch, 8 micro-batches
    assert float(backward_s) == 0.0
    assert estimate(job(cuda_graph_scope=["full_iteration"])).step_breakdown_s["launch_overhead"] == pytest.approx(
        0.0, abs=1e-9)


def test_graphs_shorten_a_launch_bound_step_and_keep_the_pass_windows():
    small = {"seq_len": 128}  # short sequences: the host's launches outlast the GPU's work
    plain, graphed = job(**small), job(**small, cuda_graph_scope=["layer"])
    slower, faster = estimate(plain), estimate(graphed)
    assert slower.step_breakdown_s["launch_overhead"] > 10 * faster.step_breakdown_s["launch_overhead"]
    assert faster.step_time_s < slower.step_time_s
    # data-parallel traffic hides under each pass in proportion to its kernels, however they launch
    a, b = (_micro_batch(inputs_from_job(j, P), P) for j in (plain, graphed))
    assert float(a["forward"] / a["backward"]) == pytest.approx(float(b["forward"] / b["backward"]))


@pytest.mark.parametrize("model, training, said", [
    (LLAMA, {"cuda_graph_scope": ["full_iteration", "attn"]}, "list it alone"),
    (MOE, {"cuda_graph_scope": ["moe", "moe_router"]}, "give one"),
    (MOE, {"cuda_graph_scope": ["moe_preprocess"]}, "add moe_router"),
    (LLAMA, {"cuda_graph_scope": ["moe_router"]}, "this model has none"),
    (LLAMA, {"cuda_graph_scope": ["layer"], "recompute": "full"}, "only under full_iteration"),
])
def test_megatron_core_rules_for_graph_scopes(model, training, said):
    with pytest.raises(TrainrigError) as error:
        job(model, **training)
    assert error.value.field == "training.cuda_graph_scope" and said in str(error.value)


def test_the_estimate_names_graphs_or_their_absence():
    assert any("no CUDA graphs (cuda_graph_scope unset)" in line for line in estimate(job()).assumptions)
    graphed = estimate(job(cuda_graph_scope=["attn"]))
    assert graphed.config["cuda_graph_scope"] == ["attn"]
    assert any(line.startswith("CUDA graphs capture attn") for line in graphed.assumptions)
    assert not any("CUDA graph" in line for line in estimate(job(framework="hf")).assumptions)
