"""A head whose vocabulary is not a multiple of 8 per rank runs its GEMMs on cuBLAS's unaligned
kernels (measured on an H200: docs/measurements.md); stacks that pad the vocabulary do not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainrig import load_job
from trainrig.bench.scale import scaled_mapping
from trainrig.catalog.models import load_model
from trainrig.errors import TrainrigError
from trainrig.estimate import estimate
from trainrig.estimate.job_fields import head_is_unaligned, head_vocab_per_rank
from trainrig.estimate.params import DEFAULT_PARAMETERS


def _job(framework="custom", vocab_padding=None, tp=1, vocab=50257):
    training = {"seq_len": 2048, "micro_batch": 4, "global_batch": 4 * 8 // tp, "precision": "bf16",
                "framework": framework, "tp": tp}
    if vocab_padding is not None:
        training["vocab_padding_multiple"] = vocab_padding
    model = {**load_model("gpt3-1.3b").model_dump(), "vocab": vocab}
    return load_job({"model": model, "hardware": {"gpu": "H200-SXM5-141GB", "n_gpus": 8}, "training": training})


def test_each_stack_pads_the_vocabulary_its_own_way():
    assert head_vocab_per_rank(_job("megatron", tp=8)) == 6400  # 50257 → 51200 = 50·128·8, per rank 6400
    assert head_vocab_per_rank(_job("litgpt")) == 50688  # the next multiple of 512
    assert head_vocab_per_rank(_job("hf-trainer")) == 50257  # the checkpoint's, unpadded
    assert head_vocab_per_rank(_job("custom")) == 50264  # taken to pad to 8, as pretraining codebases do
    assert head_vocab_per_rank(_job("custom", vocab_padding=1, tp=2)) == 25129
    assert [head_is_unaligned(_job(fw)) for fw in ("megatron", "litgpt", "hf-trainer", "custom")] == [
        False, False, True, False]


def test_only_the_unaligned_head_pays_and_it_pays_the_measured_rate():
    padded, unpadded = estimate(_job("custom")), estimate(_job("custom", vocab_padding=1))
    # the padding itself adds no FLOPs here: the one difference is the head's kernel rate
    flat = estimate(_job("custom", vocab_padding=1), params=replace(DEFAULT_PARAMETERS, misaligned_gemm_fraction=1.0))
    assert flat.step_time_s == pytest.approx(padded.step_time_s, rel=1e-12)
    assert unpadded.step_time_s > 1.1 * padded.step_time_s
    half = replace(DEFAULT_PARAMETERS, misaligned_gemm_fraction=0.5)
    halfway = estimate(_job("custom", vocab_padding=1), params=half)
    assert padded.step_time_s < halfway.step_time_s < unpadded.step_time_s
    assert estimate(_job("custom", vocab=50304, vocab_padding=1)).step_time_s < unpadded.step_time_s


def test_the_assumptions_say_what_was_padded_and_what_runs_unaligned():
    said = " ".join(estimate(_job("hf-trainer")).assumptions)
    assert "unaligned kernels at 23%" in said and "50257 vocabulary rows per rank" in said
    said = " ".join(estimate(_job("custom")).assumptions)
    assert "vocabulary of 50257 padded to 50264" in said and "vocab_padding_multiple: 1" in said
    aligned = " ".join(estimate(_job("hf-trainer", vocab=50304)).assumptions)
    assert "vocab" not in aligned and "unaligned" not in aligned


def test_the_bench_builds_the_head_unpadded_and_says_so():
    mapping, _ = scaled_mapping(_job("megatron", tp=8), 2)
    assert mapping["training"]["vocab_padding_multiple"] == 1


@pytest.mark.parametrize("value", [0, -8, 100000])
def test_a_padding_out_of_range_names_the_field(value):
    with pytest.raises(TrainrigError, match="vocab_padding_multiple"):
        _job(vocab_padding=value)


def test_an_unaligned_head_gets_a_note_with_the_padded_step():
    unpadded, padded = estimate(_job("hf-trainer")), estimate(_job("hf-trainer", vocab_padding=64))
    note = next(n for n in unpadded.notes if "vocabulary rows per rank" in n)
    assert "padded to 50304" in note and "pad_to_multiple_of=64" in note
    assert f"would take {padded.step_time_s:.3g} s instead of {unpadded.step_time_s:.3g} s" in note
    assert not any("vocabulary rows per rank" in n for n in padded.notes)
    # under tensor parallelism the padding is per rank, as Megatron-Core pads it
    assert "padded to 50304" in next(n for n in estimate(_job("custom", vocab_padding=1, tp=2)).notes
                                     if "vocabulary rows per rank" in n)
