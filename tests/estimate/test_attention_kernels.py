"""Attention kernels per GPU generation, fp8 recipes and MFU against the right peak (issue 12, item 3).

The new fields keep old job files meaning what they did (`flash_attention*` are aliases), refuse a
kernel or recipe the GPU cannot run in one sentence naming the field, and order as physics says:
unfused attention is slower than fused at long sequences, fp8 linears faster than bf16 ones on
Hopper, a recipe that reads its input once more is not cheaper than one that does not.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_invariants import SETTINGS, job_mappings

from trainrig import estimate, load_job
from trainrig.errors import TrainrigError
from trainrig.estimate.compute import attention_time_s, elementwise_bytes_per_token, linear_time_s
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS


def _job(gpu: str = "H100-SXM5-80GB", seq_len: int = 8192, n_gpus: int = 8, **training):
    return load_job({"model": "llama3-8b", "hardware": {"gpu": gpu, "n_gpus": n_gpus},
                     "training": {"seq_len": seq_len, "global_batch": 32, "zero": 3, **training}})


def _tokens(job) -> float:
    return estimate(job, advise_fit=False).tokens_per_s_per_gpu


def _attention_s(job) -> float:
    x = inputs_from_job(job, DEFAULT_PARAMETERS)
    tokens = x.micro_batch * x.seq_len / x.cp
    forward, backward = attention_time_s(tokens, x.n_heads / x.tp, x, DEFAULT_PARAMETERS)
    return float(forward + backward)


# ---- aliases and defaults -----------------------------------------------------------------------

@pytest.mark.parametrize(("gpu", "alias", "kernel"), [
    ("H100-SXM5-80GB", {"flash_attention": False}, "eager"),
    ("H100-SXM5-80GB", {"flash_attention_version": 1}, "fa1"),
    ("H100-SXM5-80GB", {"flash_attention_version": 2}, "fa2"),
    ("H100-SXM5-80GB", {}, "fa2"),
    ("A100-SXM4-80GB", {"flash_attention_version": 1}, "fa1"),
    ("A100-SXM4-80GB", {}, "fa2"),
    ("V100-SXM2-32GB", {"precision": "fp16"}, "sdpa"),  # FA2 default falls back to SDPA's mem-efficient kernel
    ("T4", {"precision": "fp16", "flash_attention_version": 1}, "fa1"),
])
def test_the_old_fields_estimate_what_the_new_field_does(gpu, alias, kernel):
    precision = {"precision": alias.pop("precision")} if "precision" in alias else {}
    n_gpus = 1 if gpu == "T4" else 8
    old = estimate(_job(gpu, n_gpus=n_gpus, seq_len=2048, **precision, **alias), advise_fit=False)
    new = estimate(_job(gpu, n_gpus=n_gpus, seq_len=2048, **precision, attention_kernel=kernel), advise_fit=False)
    assert new.step_time_s == pytest.approx(old.step_time_s, rel=1e-12)
    assert new.memory_per_gpu_gib == pytest.approx(old.memory_per_gpu_gib, rel=1e-12)


def test_sdpa_is_flash_attention_2_where_it_runs_and_the_unfused_path_where_nothing_fused_does():
    assert _tokens(_job(attention_kernel="sdpa")) == pytest.approx(_tokens(_job(attention_kernel="fa2")), rel=1e-12)
    mi100 = {"precision": "fp16", "n_gpus": 4, "seq_len": 2048}
    assert _tokens(_job("MI100", attention_kernel="sdpa", **mi100)) == pytest.approx(
        _tokens(_job("MI100", attention_kernel="eager", **mi100)), rel=1e-12)


def test_a_default_kernel_the_gpu_cannot_run_falls_back_with_a_warning_not_an_error():
    result = estimate(_job("V100-SXM2-32GB", precision="fp16", seq_len=2048), advise_fit=False)
    assert any("cannot run FlashAttention-2" in w for w in result.warnings), result.warnings


def test_megatron_on_hopper_defaults_to_cudnn_attention_and_says_so():
    result = estimate(_job(framework="megatron"), advise_fit=False)
    assert result.config["attention_kernel"] == "cudnn"
    assert any("cuDNN" in a and "attention_kernel: cudnn" in a for a in result.assumptions), result.assumptions
    on_a100 = estimate(_job("A100-SXM4-80GB", framework="megatron", precision="bf16"), advise_fit=False)
    assert on_a100.config["attention_kernel"] == "fa2"


def test_every_estimate_names_its_default_kernel_and_recipe_and_not_what_the_job_gave():
    default = estimate(_job(precision="fp8"), advise_fit=False)
    assert any("attention_kernel: fa2" in a for a in default.assumptions), default.assumptions
    assert any("fp8_recipe: delayed" in a for a in default.assumptions), default.assumptions
    given_ = estimate(_job(precision="fp8", attention_kernel="fa3", fp8_recipe="tensorwise"), advise_fit=False)
    assert not any("attention_kernel" in a or "fp8_recipe" in a for a in given_.assumptions), given_.assumptions
    assert given_.config["attention_kernel"] == "fa3" and given_.config["fp8_recipe"] == "tensorwise"


# ---- what a GPU cannot run ----------------------------------------------------------------------

def _one_sentence_naming(error: TrainrigError, field: str) -> None:
    text = str(error)
    assert field in text, text
    assert text.count(". ") == 0 and "\n" not in text, text


def test_flashattention_3_off_hopper_is_one_sentence_naming_the_field():
    with pytest.raises(TrainrigError) as error:
        _job("A100-SXM4-80GB", attention_kernel="fa3")
    _one_sentence_naming(error.value, "training.attention_kernel")
    assert "A100" in str(error.value) and "fa2" in str(error.value)


@pytest.mark.parametrize(("gpu", "kernel"), [("V100-SXM2-32GB", "fa2"), ("V100-SXM2-32GB", "cudnn"),
                                             ("T4", "fa2"), ("B200", "fa3"), ("MI300X", "cudnn")])
def test_kernels_a_generation_lacks_are_refused(gpu, kernel):
    with pytest.raises(TrainrigError) as error:
        _job(gpu, precision="fp16", n_gpus=1, attention_kernel=kernel)
    _one_sentence_naming(error.value, "training.attention_kernel")


def test_a_kernel_contradicting_flash_attention_is_refused():
    for aliases in ({"flash_attention": False}, {"flash_attention_version": 1}):
        with pytest.raises(TrainrigError) as error:
            _job(attention_kernel="fa2", **aliases)
        _one_sentence_naming(error.value, "training.attention_kernel")


@pytest.mark.parametrize("training", [{"attention_kernel": "eager"}, {"attention_kernel": "fa1"},
                                      {"attention_kernel": "cudnn", "precision": "fp8", "fp8_recipe": "blockwise"},
                                      {"framework": "megatron"}, {"framework": "torchtitan", "precision": "fp8"}])
def test_a_job_written_back_out_estimates_the_same(training):
    """Plans, what-ifs and the bench re-load jobs from `job_to_mapping`, which writes every field."""
    from trainrig.catalog.job_file import job_to_mapping

    job = _job(**training)
    again = load_job(job_to_mapping(job))
    first, second = estimate(job, advise_fit=False), estimate(again, advise_fit=False)
    assert second.step_time_s == first.step_time_s
    assert second.config["attention_kernel"] == first.config["attention_kernel"]
    assert second.config["fp8_recipe"] == first.config["fp8_recipe"]


def test_mxfp8_off_blackwell_is_refused_and_runs_on_it():
    with pytest.raises(TrainrigError) as error:
        _job(precision="fp8", fp8_recipe="mxfp8")
    _one_sentence_naming(error.value, "training.fp8_recipe")
    assert estimate(_job("B200", precision="fp8", fp8_recipe="mxfp8"), advise_fit=False).tokens_per_s > 0


def test_a_recipe_without_fp8_is_refused():
    with pytest.raises(TrainrigError) as error:
        _job(precision="bf16", fp8_recipe="delayed")
    _one_sentence_naming(error.value, "training.fp8_recipe")


def test_the_cli_refuses_fa3_on_an_a100_with_exit_2():
    result = subprocess.run([sys.executable, "-m", "trainrig", "estimate", "--model", "llama3-8b", "--gpu",
                             "a100", "--gpus", "8", "--set", "training.attention_kernel=fa3"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "training.attention_kernel" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


# ---- first principles ---------------------------------------------------------------------------

@pytest.mark.parametrize("gpu", ["A100-SXM4-80GB", "H100-SXM5-80GB"])
def test_unfused_attention_is_slower_than_every_fused_kernel_at_long_sequences(gpu):
    """The whole step: unfused attention's score GEMMs may run near the GEMM rate, but it also
    writes and reads the s × s scores through HBM, which no fused kernel does."""
    eager = _tokens(_job(gpu, seq_len=32768, attention_kernel="eager"))
    for kernel in ("fa1", "fa2", "cudnn") + (("fa3",) if gpu.startswith("H100") else ()):
        assert _tokens(_job(gpu, seq_len=32768, attention_kernel=kernel)) > eager, kernel


def test_on_hopper_fa3_and_cudnn_beat_fa2_and_fa2_beats_fa1():
    times = {k: _attention_s(_job(attention_kernel=k)) for k in ("fa1", "fa2", "cudnn", "fa3")}
    assert times["fa3"] < times["cudnn"] < times["fa2"] < times["fa1"], times


def test_cudnn_is_no_faster_than_fa2_where_no_faster_kernel_is_measured():
    a100 = {"gpu": "A100-SXM4-80GB"}
    assert _attention_s(_job(**a100, attention_kernel="cudnn")) == pytest.approx(
        _attention_s(_job(**a100, attention_kernel="fa2")), rel=1e-12)


def test_fp8_linear_gemms_are_faster_than_bf16_on_hopper():
    p = DEFAULT_PARAMETERS
    fp8 = inputs_from_job(_job(precision="fp8"), p)
    bf16 = inputs_from_job(_job(precision="bf16"), p)
    tokens = 8192
    for fan_in, fan_out in ((4096, 6144), (4096, 28672), (14336, 4096)):
        forward8, backward8 = linear_time_s(tokens, fan_in, fan_out, fp8, p)
        forward16, backward16 = linear_time_s(tokens, fan_in, fan_out, bf16, p)
        assert forward8 < forward16 and backward8 < backward16


def test_the_output_head_of_an_fp8_run_runs_at_the_bf16_rate():
    fp8 = inputs_from_job(_job(precision="fp8"), DEFAULT_PARAMETERS)
    bf16 = inputs_from_job(_job(precision="bf16"), DEFAULT_PARAMETERS)
    assert fp8.head_gemm_peak_tflops == bf16.gemm_peak_tflops
    assert fp8.head_matmul_efficiency == pytest.approx(bf16.matmul_efficiency)


def test_recipe_cast_costs_order_delayed_then_block_scaled_then_tensorwise():
    p = DEFAULT_PARAMETERS
    cost = {r: float(elementwise_bytes_per_token(inputs_from_job(_job(precision="fp8", fp8_recipe=r), p), p))
            for r in ("delayed", "blockwise", "tensorwise")}
    cost["mxfp8"] = float(elementwise_bytes_per_token(
        inputs_from_job(_job("B200", precision="fp8", fp8_recipe="mxfp8"), p), p))
    assert cost["delayed"] < cost["blockwise"] < cost["tensorwise"], cost
    assert cost["delayed"] < cost["mxfp8"]
    speed = {r: _tokens(_job(precision="fp8", fp8_recipe=r)) for r in ("delayed", "blockwise", "tensorwise")}
    assert speed["delayed"] >= speed["blockwise"] >= speed["tensorwise"], speed


def test_the_default_recipe_is_delayed_and_torchtitans_is_tensorwise():
    assert _tokens(_job(precision="fp8")) == _tokens(_job(precision="fp8", fp8_recipe="delayed"))
    titan = estimate(_job(precision="fp8", framework="torchtitan"), advise_fit=False)
    assert titan.config["fp8_recipe"] == "tensorwise"


# ---- MFU against the peak it is quoted against ------------------------------------------------------

def test_mfu_names_its_peak():
    fp8 = estimate(_job(precision="fp8"), advise_fit=False)
    assert fp8.mfu_peak == "fp8 dense" and fp8.mfu_peak_tflops == pytest.approx(1978.9)
    assert fp8.mfu == pytest.approx(fp8.model_tflops_per_gpu / fp8.mfu_peak_tflops, rel=1e-9)
    bf16 = estimate(_job(precision="bf16"), advise_fit=False).to_dict()
    assert bf16["mfu_peak"] == "bf16 dense" and bf16["mfu_peak_tflops"] == pytest.approx(989.4)


@settings(SETTINGS, max_examples=150)
@given(mapping=job_mappings(precision="fp8", max_nodes=1),
       kernel=st.sampled_from(["fa2", "cudnn", "fa3"]), recipe=st.sampled_from(["tensorwise", "delayed", "blockwise"]))
def test_fp8_mfu_against_the_fp8_peak_never_exceeds_one(mapping, kernel, recipe):
    """With the fastest kernels on Hopper and every recipe, over random fp8 layouts."""
    training = mapping["training"]
    hopper = mapping["hardware"]["gpu"].startswith(("H100", "H200"))
    if training.get("flash_attention", True):
        training["attention_kernel"] = kernel if hopper or kernel != "fa3" else "fa2"
        if mapping["hardware"]["gpu"] in ("RTX-4090", "RTX-5090", "L40S") and kernel == "fa3":
            training["attention_kernel"] = "fa2"
    training["fp8_recipe"] = recipe
    result = estimate(load_job(mapping), advise_fit=False)
    assert 0 < result.mfu <= 1, (result.mfu, mapping)
    assert result.mfu == pytest.approx(result.model_tflops_per_gpu / result.mfu_peak_tflops, rel=1e-9)


def test_every_estimate_names_the_power_limit_and_clocks_it_assumed():
    """Issue 12, defaults visible: the datasheet peaks assume the board's default power limit."""
    from trainrig import estimate, load_job

    result = estimate(load_job("examples/llama3-8b-8xh100.yaml"))
    line = next(a for a in result.assumptions if "power limit" in a)
    assert "H100-SXM5-80GB" in line and "700 W" in line and "not modelled" in line
