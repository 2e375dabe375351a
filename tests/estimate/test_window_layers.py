"""Sliding-window attention on some layers only (`model.full_attention_layers`: Gemma 2 and GPT-OSS
alternate windowed and full layers): FLOPs, kernel keys and saved scores mix the two kinds by
their layer counts, counted by hand."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.compute import fused_attention_keys
from trainrig.estimate.flops import attention_flops_per_token
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import activation_bytes_per_layer
from trainrig.estimate.params import DEFAULT_PARAMETERS as P
from trainrig.specs import ModelSpec

# 8 layers, window 256 over 4096-token sequences
MODEL = {"n_layers": 8, "hidden": 1024, "n_heads": 8, "ffn_hidden": 2816, "vocab": 32000, "sliding_window": 256}


def x_of(model=None, **training):
    job = make_job(model={**MODEL, **(model or {})}, hardware={"n_gpus": 1},
                   training={"seq_len": 4096, "global_batch": 8, "packing": False, **training})
    return inputs_from_job(job, P)


def test_attention_flops_weigh_window_and_full_layers_by_their_counts():
    # 6 windowed layers see 256 keys, 2 full ones 4096: 2 · 2·keys·heads·d per layer (d = 128)
    expected = 6 * 4 * 256 * 8 * 128 + 2 * 4 * 4096 * 8 * 128
    assert float(attention_flops_per_token(x_of({"full_attention_layers": 2}))) == pytest.approx(expected)


def test_no_full_layers_is_the_window_everywhere_and_all_full_layers_is_no_window():
    every = x_of()
    none = x_of({"full_attention_layers": 0})
    full = x_of({"full_attention_layers": 8})
    plain = x_of({"sliding_window": None})
    assert float(attention_flops_per_token(every)) == float(attention_flops_per_token(none))
    assert float(attention_flops_per_token(full)) == float(attention_flops_per_token(plain))


def test_the_fused_kernel_sees_the_window_or_half_the_causal_sequence_per_layer():
    # windowed layers: min(p, 256) keys at position p, 256 − 256²/(2·4096) on average, and one more
    # 128-key tile that the window's edge cuts; full causal ones (4096 + 1)/2 on average
    x = x_of({"full_attention_layers": 4})
    windowed = 256 - 256 * 256 / (2 * 4096) + 128
    assert float(fused_attention_keys(x)) == pytest.approx(0.5 * windowed + 0.5 * 4097 / 2)


def test_a_window_of_one_tile_computes_two():
    # GPT-OSS's 128-key window: every query block touches its own tile and the one before it
    x = x_of({"sliding_window": 128}, seq_len=8192)
    assert float(fused_attention_keys(x)) == pytest.approx(128 - 128 * 128 / (2 * 8192) + 128)


def test_unfused_attention_saves_scores_over_the_average_keys():
    window, alternating = x_of(flash_attention=False), x_of({"full_attention_layers": 4}, flash_attention=False)
    saved_window = activation_bytes_per_layer(window)[0]
    saved_alternating = activation_bytes_per_layer(alternating)[0]
    # 2-byte scores of 8 heads per token: half the layers over 4096 keys instead of 256
    assert float(saved_alternating - saved_window) == pytest.approx(4096 * 2 * 8 * 0.5 * (4096 - 256))


def test_the_count_needs_a_window_and_at_most_every_layer():
    for change in ({"sliding_window": None, "full_attention_layers": 2}, {"full_attention_layers": 9}):
        with pytest.raises(TrainrigError) as error:
            ModelSpec(**{**MODEL, **change})
        assert error.value.field == "model.full_attention_layers"


def test_full_layers_slow_the_step():
    job = make_job(model={**MODEL, "full_attention_layers": 4}, hardware={"n_gpus": 1},
                   training={"seq_len": 4096, "global_batch": 8})
    windowed = make_job(model=MODEL, hardware={"n_gpus": 1}, training={"seq_len": 4096, "global_batch": 8})
    assert estimate(job).step_time_s > estimate(windowed).step_time_s
