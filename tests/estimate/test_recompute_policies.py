"""What recomputation redoes and keeps, counted from the frameworks' code: `recompute: selective`
where flash attention leaves no scores to drop (torchtitan's op-level policy: every odd matmul kept,
the even ones the backward needs redone; Megatron-Core's core-attention checkpoint: the attention
kernel's forward again), and full recompute of some layers only (`recompute_num_layers`, Megatron's
block method)."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.compute import linear_time_s
from trainrig.estimate.flops import attention_flops_per_token, hardware_flops_per_token, model_flops_per_token
from trainrig.estimate.host_issue import _kernels_per_layer
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import activation_bytes_per_layer
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


# ---- recompute_num_layers: full recompute of some of a stage's layers ---------------------------


def test_half_the_layers_recomputed_redo_half_the_forward_flops():
    full = extra_flops_per_token(framework="megatron", recompute="full")
    assert extra_flops_per_token(framework="megatron", recompute="full", recompute_num_layers=4) == \
        pytest.approx(full / 2)
    assert extra_flops_per_token(framework="megatron", recompute="full", recompute_num_layers=8) == \
        pytest.approx(full)


def test_half_the_layers_recomputed_take_half_the_recompute_time():
    big = {"micro_batch": 8, "seq_len": 4096}
    compute = {n: estimate(job(framework="megatron", recompute="full" if n else "none",
                               **({"recompute_num_layers": n} if n else {}), **big),
                           advise_fit=False).step_breakdown_s["compute"] for n in (0, 2, 8)}
    assert compute[2] - compute[0] == pytest.approx((compute[8] - compute[0]) / 4, rel=1e-9)


def test_layers_not_recomputed_keep_their_whole_activation_set():
    x_none = inputs_from_job(job(framework="megatron"), P)
    x_full = inputs_from_job(job(framework="megatron", recompute="full"), P)
    x_part = inputs_from_job(job(framework="megatron", recompute="full", recompute_num_layers=2), P)
    whole, layer_input = activation_bytes_per_layer(x_none)[0], activation_bytes_per_layer(x_full)[0]
    assert layer_input == pytest.approx(1024 * 2 * 1024)  # a micro-batch's tokens · 16 bits · hidden
    assert activation_bytes_per_layer(x_part)[0] == pytest.approx(2 / 8 * layer_input + 6 / 8 * whole)


def test_recompute_num_layers_counts_per_model_chunk_under_interleaving():
    # 8 layers on pp 2 × vpp 2: 2 layers per chunk, so 1 per chunk is half the stage's layers
    x = inputs_from_job(job(n_gpus=2, framework="megatron", recompute="full", pp=2, vpp=2, recompute_num_layers=1), P)
    assert float(x.full_recompute_share) == pytest.approx(0.5)


def test_recompute_num_layers_is_inert_without_full_recompute():
    for recompute in ("none", "selective"):
        plain = estimate(job(framework="megatron", recompute=recompute), advise_fit=False)
        with_layers = estimate(job(framework="megatron", recompute=recompute, recompute_num_layers=2),
                               advise_fit=False)
        assert with_layers.step_time_s == plain.step_time_s
        assert with_layers.memory_per_gpu_gib == plain.memory_per_gpu_gib


@pytest.mark.parametrize("layers", [9, 0])
def test_recompute_num_layers_outside_the_model_is_refused(layers):
    with pytest.raises((TrainrigError, ValueError), match="recompute_num_layers"):
        job(framework="megatron", recompute="full", recompute_num_layers=layers)


# ---- an early-stopping checkpoint (non-reentrant torch.utils.checkpoint) ------------------------


def test_an_early_stopping_checkpoint_does_not_redo_the_down_projection():
    reentrant = extra_flops_per_token(APART, framework="megatron", recompute="full")
    early = extra_flops_per_token(APART, framework="torchtitan", recompute="full")
    assert reentrant - early == pytest.approx(8 * 2 * 1024 * 2816)  # 8 layers' down projection, 2·h·ffn


def test_an_early_stopping_checkpoint_launches_two_kernels_fewer_per_layer():
    def recompute_kernels(framework):
        full, none = (inputs_from_job(job(APART, framework=framework, recompute=r), P) for r in ("full", "none"))
        return float(_kernels_per_layer(full, P)[1] - _kernels_per_layer(none, P)[1])
    # the same layout, so the same forward: the down projection's GEMM and the residual add after it
    assert recompute_kernels("megatron") - recompute_kernels("torchtitan") == 2


def test_a_job_that_recomputes_some_layers_is_told_to_recompute_them_all():
    from trainrig import load_job
    job_file = {"model": "llama3-8b", "hardware": {"gpu": "A100-SXM4-80GB", "n_gpus": 1},
                "training": {"seq_len": 8192, "global_batch": 2, "micro_batch": 2, "recompute": "full",
                             "recompute_num_layers": 4, "method": "lora", "lora_rank": 16}}
    result = estimate(load_job(job_file))
    assert not result.fits
    fixes = [fix for fix in result.fit_fixes if "recompute_num_layers=null" in fix["what_if"]]
    assert fixes and all(fix["memory_per_gpu_gib"] < result.memory_per_gpu_gib for fix in fixes)
