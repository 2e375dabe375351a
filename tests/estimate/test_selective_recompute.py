"""What `recompute: selective` redoes where flash attention leaves no scores to drop, counted from
the frameworks' code: torchtitan's op-level policy (every odd matmul kept, the even ones the backward
needs redone) and Megatron-Core's core-attention checkpoint (the attention kernel's forward again)."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.estimate.compute import linear_time_s
from trainrig.estimate.core import _kernels_per_layer
from trainrig.estimate.flops import attention_flops_per_token, hardware_flops_per_token, model_flops_per_token
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

# a small Llama (GQA, gated MLP): q width 1024, k/v width 256, ffn 2816
LLAMA = {"n_layers": 8, "hidden": 1024, "n_heads": 8, "n_kv_heads": 2, "ffn_hidden": 2816, "vocab": 32000}
APART = {"fused_qkv": False, "fused_gate_up": False}
FUSED = {"fused_qkv": True, "fused_gate_up": True}


def job(model=None, n_gpus=1, **training):
    hardware = {"gpu": "H100-SXM5-80GB", "n_gpus": n_gpus, "gpus_per_node": max(n_gpus, 1)}
    return make_job(model={**LLAMA, **(model or {})}, hardware=hardware,
                    training={"seq_len": 1024, "global_batch": 8 * n_gpus, "flash_attention": True, **training})


def extra_flops_per_token(model=None, n_gpus=1, **training):
    """Hardware FLOPs beyond the model's, per token."""
    x = inputs_from_job(job(model, n_gpus, **training), P)
    return float(hardware_flops_per_token(x) - model_flops_per_token(x))


def test_op_level_policy_redoes_k_o_and_the_up_projection():
    # q k v o w1 w3 w2: the even matmuls k, o and w3 are redone, 2 FLOPs per multiply-add
    per_layer = 2 * 1024 * (256 + 1024) + 2 * 1024 * 2816
    assert extra_flops_per_token(APART, framework="torchtitan", recompute="selective") == pytest.approx(8 * per_layer)


def test_op_level_policy_keeps_fused_linears_and_redoes_only_o():
    # qkv o w1w3 w2: the fused qkv and gate/up linears are the odd matmuls, kept; the down projection
    # is redone only as far as the backward needs, which is not at all
    assert extra_flops_per_token(FUSED, recompute="selective") == pytest.approx(8 * 2 * 1024 * 1024)


def test_op_level_policy_keeps_o_behind_sequence_parallel_reduce_scatter():
    # torchtitan saves reduce-scatter outputs: o's own output is not needed again
    per_layer = 2 * 1024 * 256 + 2 * 1024 * 2816
    extra = extra_flops_per_token(APART, n_gpus=2, framework="torchtitan", recompute="selective", tp=2,
                                  sequence_parallel=True)
    assert extra == pytest.approx(8 * per_layer)


def test_megatron_selective_redoes_the_attention_kernel():
    x = inputs_from_job(job(framework="megatron", recompute="selective"), P)
    assert extra_flops_per_token(framework="megatron", recompute="selective") == pytest.approx(
        float(attention_flops_per_token(x)))


@pytest.mark.parametrize("framework", ["torchtitan", "megatron"])
def test_selective_costs_time_between_none_and_full(framework):
    steps = [estimate(job(framework=framework, recompute=r), advise_fit=False).step_time_s
             for r in ("none", "selective", "full")]
    assert steps[0] < steps[1] < steps[2]


def test_op_level_recompute_takes_its_gemms_again():
    big = {"micro_batch": 8, "seq_len": 4096}  # GPU-bound: the host's kernel issue hides behind
    compute = {r: estimate(job(APART, framework="torchtitan", recompute=r, **big), advise_fit=False)
               .step_breakdown_s["compute"] for r in ("none", "selective", "full")}
    x = inputs_from_job(job(APART, framework="torchtitan", recompute="selective", **big), P)
    # k (1024 → 256), o (1024 → 1024) and w3 (1024 → 2816), each timed on its own, in each of 8 layers
    gemms = 8 * sum(float(linear_time_s(8 * 4096, fan_in, fan_out, x, P)[0])
                    for fan_in, fan_out in ((1024, 256), (1024, 1024), (1024, 2816)))
    assert gemms <= compute["selective"] - compute["none"] < compute["full"] - compute["none"]


def test_op_level_recompute_launches_its_kernels_again():
    x_none = inputs_from_job(job(APART, framework="torchtitan"), P)
    x_sel = inputs_from_job(job(APART, framework="torchtitan", recompute="selective"), P)
    # k, o, w3, then both norms, rotary on q and k, the attention residual add and the activation
    assert float(_kernels_per_layer(x_sel, P)[1] - _kernels_per_layer(x_none, P)[1]) == 3 + 6


def test_megatron_selective_keeps_all_but_the_log_sum_exp():
    none = estimate(job(framework="megatron"), advise_fit=False).memory_breakdown_gib["activations"]
    selective = estimate(job(framework="megatron", recompute="selective"), advise_fit=False)
    lse_gib = 8 * 1024 * 4 * 8 / 2**30  # layers · a micro-batch's tokens · fp32 · heads
    assert none - selective.memory_breakdown_gib["activations"] == pytest.approx(lse_gib, rel=1e-6)


@pytest.mark.parametrize(("framework", "words"), [("torchtitan", "op-level policy"), ("megatron", "core-attention")])
def test_the_estimate_names_the_selective_policy(framework, words):
    said = estimate(job(framework=framework, recompute="selective"), advise_fit=False).assumptions
    assert any(words in line for line in said)
    assert not any("selective recompute" in line for line in estimate(job(framework=framework)).assumptions)
