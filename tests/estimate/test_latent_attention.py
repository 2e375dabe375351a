"""Multi-head latent attention (DeepSeek-V2 §2.1), counted by hand on a small model: parameters,
FLOPs, the GEMMs it runs and where tensor parallelism replicates them, the attention kernel at two
head widths, its saved latents, and the narrow all-gather sequence parallelism does."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.compute import attention_time_s, linear_time_s
from trainrig.estimate.core import _gemm_times_s
from trainrig.estimate.flops import attention_flops_per_token, flops_per_token, model_flops_per_token
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import activation_bytes_per_layer, local_parameter_counts
from trainrig.estimate.params import DEFAULT_PARAMETERS as P
from trainrig.estimate.traffic import _mla_gather_saving
from trainrig.specs import ModelSpec

# hidden 64, 4 heads of query/key width 24 (16 + 8 rotary) and value width 16, latents 48 (q), 32 (kv)
MLA = {"n_layers": 2, "hidden": 64, "n_heads": 4, "head_dim": 24, "v_head_dim": 16, "qk_rope_head_dim": 8,
       "q_lora_rank": 48, "kv_lora_rank": 32, "ffn_hidden": 128, "vocab": 1000}
Q_DOWN, Q_UP = 64 * 48, 48 * 4 * 24
KV_DOWN, KV_UP = 64 * (32 + 8), 32 * 4 * (16 + 16)
OUTPUT = 4 * 16 * 64
LATENT_NORMS = 48 + 32
DSV3 = {"n_layers": 61, "hidden": 7168, "n_heads": 128, "head_dim": 192, "v_head_dim": 128, "kv_lora_rank": 512,
        "q_lora_rank": 1536, "qk_rope_head_dim": 64, "ffn_hidden": 18432, "vocab": 129280, "n_experts": 256,
        "top_k": 8, "expert_ffn_hidden": 2048, "n_shared_experts": 1, "n_dense_layers": 3}


def job(model=None, n_gpus=1, **training):
    hardware = {"gpu": "H100-SXM5-80GB", "n_gpus": n_gpus, "gpus_per_node": max(n_gpus, 1)}
    return make_job(model={**MLA, **(model or {})}, hardware=hardware,
                    training={"seq_len": 256, "global_batch": 8 * n_gpus, "flash_attention": True, **training})


def test_parameters_are_the_down_and_up_projections_the_latent_norms_and_o():
    spec = ModelSpec(**MLA)
    assert spec.attention_params_per_layer == Q_DOWN + Q_UP + KV_DOWN + KV_UP + OUTPUT + LATENT_NORMS
    assert spec.attention_replicated_params_per_layer == Q_DOWN + KV_DOWN + LATENT_NORMS


def test_queries_without_a_latent_are_one_linear_from_the_hidden_state():
    spec = ModelSpec(**{**MLA, "q_lora_rank": None})
    assert spec.attention_params_per_layer == 64 * 4 * 24 + KV_DOWN + KV_UP + OUTPUT + 32


def test_deepseek_v3_counts_its_published_671b_and_37b_active():
    spec = ModelSpec(**DSV3)
    assert spec.n_params == pytest.approx(671e9, rel=0.001)  # DeepSeek-V3 report: 671B total
    assert spec.n_active_params == pytest.approx(37e9, rel=0.02)  # 37B activated per token


def test_model_flops_count_every_projection_and_two_head_widths_in_attention():
    # per token: 6 FLOPs per weight of every linear; attention 3 × 2·s·heads·(d_qk + d_v) per layer
    linears = 2 * (Q_DOWN + Q_UP + KV_DOWN + KV_UP + OUTPUT + 3 * 64 * 128) + 64 * 1000
    attention = 2 * (2 * 256 * 4 * (24 + 16))
    assert flops_per_token(ModelSpec(**MLA), 256) == pytest.approx(6 * linears + 3 * attention)
    x = inputs_from_job(job(), P)
    assert float(attention_flops_per_token(x)) == pytest.approx(attention)
    assert float(model_flops_per_token(x)) == pytest.approx(6 * linears + 3 * attention)


def test_tensor_parallel_ranks_hold_the_down_projections_whole():
    one = local_parameter_counts(inputs_from_job(job(), P))[0]
    two = local_parameter_counts(inputs_from_job(job(n_gpus=2, tp=2), P))[0]
    split = Q_UP + KV_UP + OUTPUT
    # both layers: the split part halves, the replicated part does not (the rest is the same model)
    assert float(one - two) == pytest.approx(2 * split / 2 + (1000 * 64 * 2 + 2 * 3 * 64 * 128) / 2)


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_attention_gemms_are_the_five_linears_with_replicated_downs(sequence_parallel):
    x = inputs_from_job(job(n_gpus=2, tp=2, sequence_parallel=sequence_parallel), P)
    tokens = 256.0
    down_tokens = tokens / 2 if sequence_parallel else tokens  # Megatron-Core: on the sequence shard
    shapes = [(down_tokens, 64, 48), (tokens, 48, 4 * 24 / 2), (down_tokens, 64, 40), (tokens, 32, 4 * 32 / 2),
              (tokens, 4 * 16 / 2, 64)]
    forward = sum(float(linear_time_s(t, fan_in, fan_out, x, P)[0]) for t, fan_in, fan_out in shapes)
    assert float(_gemm_times_s(x, P)["attention"][0]) == pytest.approx(forward)


def test_the_attention_kernel_runs_both_head_widths():
    x = inputs_from_job(job(), P)
    same_widths = inputs_from_job(job({"v_head_dim": 24}), P)
    forward, _ = attention_time_s(256.0, 4.0, x, P)
    wider, _ = attention_time_s(256.0, 4.0, same_widths, P)
    assert float(forward / wider) == pytest.approx((24 + 16) / (24 + 24))


def test_saved_activations_add_both_latents_twice_and_value_width_tensors():
    x = inputs_from_job(job(), P)
    plain = inputs_from_job(job({"q_lora_rank": None, "kv_lora_rank": None, "qk_rope_head_dim": None,
                                 "head_dim": 24, "v_head_dim": 16}), P)
    saved, _ = activation_bytes_per_layer(x)
    plain_saved, _ = activation_bytes_per_layer(plain)
    # MLA's q and k are every head's (4·24 each, against GQA-free plain attention's same widths),
    # so only the latents differ: each norm's input and output, 2 bytes per element
    assert float(saved - plain_saved) == pytest.approx(256 * 2 * 2 * (48 + 32))


def test_sequence_parallel_gathers_the_latents_not_the_hidden_state():
    x = inputs_from_job(job(DSV3, n_gpus=2, tp=2, sequence_parallel=True, seq_len=4096), P)
    assert float(_mla_gather_saving(x)) == pytest.approx(0.5 * (1 - (1536 + 512 + 64) / 7168))
    without = inputs_from_job(job(DSV3, n_gpus=2, tp=2, seq_len=4096), P)
    assert float(_mla_gather_saving(without)) == 0.0


def test_an_mla_job_estimates_and_names_its_projection_layout():
    result = estimate(job(n_gpus=2, tp=2, sequence_parallel=True))
    assert result.step_time_s > 0 and result.fits
    assert any("latent attention" in line for line in result.assumptions)


@pytest.mark.parametrize(("change", "field"), [
    ({"qk_rope_head_dim": None}, "model.qk_rope_head_dim"),
    ({"head_dim": None}, "model.head_dim"),
    ({"qk_rope_head_dim": 24}, "model.qk_rope_head_dim"),
    ({"n_kv_heads": 2}, "model.n_kv_heads"),
    ({"kv_lora_rank": None}, "model.q_lora_rank"),
])
def test_incomplete_latent_attention_is_refused_naming_the_field(change, field):
    with pytest.raises(TrainrigError) as error:
        ModelSpec(**{**MLA, **change})
    assert error.value.field == field
