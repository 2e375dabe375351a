"""Memory formulas against the literature and the invariants a user relies on."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import GPT_LAYER, make_job
from trainrig import estimate
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import GIB, activation_bytes_per_layer, in_flight_layers, local_parameter_counts
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

S, B, H, A = 2048, 4, 2048, 16


def saved_bytes(**training) -> float:
    base = {"seq_len": S, "micro_batch": B, "global_batch": 8 * B, "dropout": True,
            "flash_attention": False, "precision": "fp16"}
    job = make_job(training={**base, **training})
    saved, _ = activation_bytes_per_layer(inputs_from_job(job, P))
    return float(saved)


def test_activations_without_parallelism_match_korthikanti_table_2():
    # Korthikanti et al. 2022, eq. (1): s·b·h·(34 + 5·a·s/h) bytes per layer
    assert saved_bytes() == pytest.approx(S * B * H * (34 + 5 * A * S / H), rel=1e-12)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_tensor_parallel_without_sequence_parallel_matches_eq_2(tp):
    # eq. (2): s·b·h·(10 + 24/t + 5·a·s/(h·t))
    expected = S * B * H * (10 + 24 / tp + 5 * A * S / (H * tp))
    assert saved_bytes(tp=tp) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_sequence_parallel_divides_everything_eq_4(tp):
    # eq. (4): s·b·h/t·(34 + 5·a·s/h)
    expected = S * B * H / tp * (34 + 5 * A * S / H)
    assert saved_bytes(tp=tp, sequence_parallel=True) == pytest.approx(expected, rel=1e-12)


def test_selective_recompute_drops_the_attention_scores_eq_6():
    # eq. (6) with t = 1: 34·s·b·h
    assert saved_bytes(recompute="selective") == pytest.approx(34 * S * B * H, rel=1e-12)


def test_full_recompute_keeps_only_the_layer_input():
    assert saved_bytes(recompute="full") == pytest.approx(2 * S * B * H, rel=1e-12)


def test_flash_attention_removes_the_quadratic_term():
    flash = saved_bytes(flash_attention=True)
    assert flash < 40 * S * B * H  # no a·s² term left
    assert saved_bytes() - flash > 4.9 * A * S * S * B


def test_mixed_precision_adam_is_18_bytes_per_parameter_on_one_gpu():
    # 2 (16-bit weights) + 4 (fp32 gradients, Megatron main_grad) + 12 (master, m, v): MODELING.md
    job = make_job(hardware={"n_gpus": 1}, training={"global_batch": 8})
    est = estimate(job)
    params = job.model.n_params
    gib = est.memory_breakdown_gib
    assert gib["weights"] * GIB == pytest.approx(2 * params, rel=1e-9)
    assert gib["gradients"] * GIB == pytest.approx(4 * params, rel=1e-9)
    assert gib["optimizer"] * GIB == pytest.approx(12 * params, rel=1e-9)


def test_first_pipeline_stage_holds_up_to_p_micro_batches():
    job = make_job(training={"pp": 4, "global_batch": 64, "micro_batch": 1}, hardware={"n_gpus": 8})
    x = inputs_from_job(job, P)
    assert float(in_flight_layers(x)) == pytest.approx(GPT_LAYER["n_layers"] / 4 * 4)
    few = make_job(training={"pp": 4, "global_batch": 4, "micro_batch": 1, "dp": 2}, hardware={"n_gpus": 8})
    assert float(in_flight_layers(inputs_from_job(few, P))) == pytest.approx(GPT_LAYER["n_layers"] / 4 * 2)


def test_interleaving_follows_korthikanti_4_2_3():
    job = make_job(training={"pp": 4, "vpp": 2, "global_batch": 64}, hardware={"n_gpus": 8})
    expected = GPT_LAYER["n_layers"] * (1 + 3 / (4 * 2))
    assert float(in_flight_layers(inputs_from_job(job, P))) == pytest.approx(expected)


@settings(max_examples=25, deadline=None)
@given(zero=st.integers(0, 3), exponent=st.integers(0, 3))
def test_zero_sharding_never_grows_with_dp(zero, exponent):
    small = make_job(hardware={"n_gpus": 2**exponent, "gpus_per_node": 8},
                     training={"zero": zero, "global_batch": 64})
    large = make_job(hardware={"n_gpus": 2 ** (exponent + 1), "gpus_per_node": 8},
                     training={"zero": zero, "global_batch": 64})
    states = ("weights", "gradients", "optimizer")
    small_states = sum(estimate(small).memory_breakdown_gib[k] for k in states)
    large_states = sum(estimate(large).memory_breakdown_gib[k] for k in states)
    if zero == 3:
        assert large_states < small_states
    else:
        assert large_states <= small_states * (1 + 1e-12)


@settings(max_examples=20, deadline=None)
@given(micro=st.sampled_from([1, 2, 4]), flash=st.booleans(), tp=st.sampled_from([1, 2]))
def test_recompute_lowers_activations_and_raises_hardware_flops(micro, flash, tp):
    runs = {r: estimate(make_job(training={"recompute": r, "micro_batch": micro, "flash_attention": flash,
                                          "tp": tp, "global_batch": 64 * micro}))
            for r in ("none", "selective", "full")}
    acts = {r: e.memory_breakdown_gib["activations"] for r, e in runs.items()}
    assert acts["full"] < acts["selective"] <= acts["none"]
    assert runs["full"].hardware_tflops_per_gpu / runs["full"].model_tflops_per_gpu > 1.2
    assert runs["none"].hardware_tflops_per_gpu == pytest.approx(runs["none"].model_tflops_per_gpu)


def test_bf16_needs_less_memory_than_fp32():
    bf16 = estimate(make_job(training={"precision": "bf16"}))
    fp32 = estimate(make_job(training={"precision": "fp32"}))
    assert bf16.memory_per_gpu_gib < fp32.memory_per_gpu_gib


def test_qlora_base_is_nf4_linears_and_16_bit_ends():
    # NF4 with double quantization: 4 bits + (8-bit absmax per 64 + fp32 per 256 blocks) per
    # weight (Dettmers et al. 2023); embedding, head and norms stay 16-bit; adapters fp32 (PEFT)
    job = make_job(model="llama3-8b", hardware={"n_gpus": 1}, training={"method": "qlora", "global_batch": 8})
    spec = job.model
    ends = spec.embedding_params + spec.vocab * spec.hidden  # untied head
    norms = spec.norm_params * (2 * spec.n_layers + 1)
    linears = spec.n_params - ends - norms
    adapters = 16 * sum((4096 + out) for out in (4096, 1024, 1024, 4096)) * spec.n_layers \
        + 16 * 3 * (4096 + 14336) * spec.n_layers
    expected = linears * (0.5 + (1 + 4 / 256) / 64) + (ends + norms) * 2 + adapters * 4
    assert estimate(job).memory_breakdown_gib["weights"] * GIB == pytest.approx(expected, rel=1e-9)

def test_expert_parallelism_divides_expert_weights():
    mixtral = {"training": {"global_batch": 64, "zero": 0}, "model": "mixtral-8x7b"}
    one = make_job(model=mixtral["model"], training=mixtral["training"])
    eight = make_job(model=mixtral["model"], training={**mixtral["training"], "ep": 8})
    dense_1, experts_1 = local_parameter_counts(inputs_from_job(one, P))
    dense_8, experts_8 = local_parameter_counts(inputs_from_job(eight, P))
    assert float(experts_8) == pytest.approx(float(experts_1) / 8)
    assert float(dense_8) == pytest.approx(float(dense_1))


def test_not_fitting_is_an_estimate_with_a_reason_and_a_fix():
    est = estimate(make_job(model="llama3-70b", hardware={"n_gpus": 8}, training={"seq_len": 4096}))
    assert not est.fits
    assert "GiB" in est.fit_message and "that fits" in est.fit_message
