"""Which kernels run (FlashAttention's generation, fused versus eager elementwise work, Megatron's
softmax fallback) and how the host's kernel issue overlaps the GPU's execution."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import GPT_LAYER, make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.compute import attention_time_s, eager_softmax, elementwise_bytes_per_token
from trainrig.estimate.core import evaluate
from trainrig.estimate.host_issue import overlapped_s
from trainrig.estimate.inputs import inputs_from_job, stack_inputs
from trainrig.estimate.params import DEFAULT_PARAMETERS as P


def _attention_forward_s(version: int, heads: int, seq_len: int = 8192) -> float:
    model = {**GPT_LAYER, "n_heads": heads, "max_positions": seq_len}
    job = make_job(model=model, training={"seq_len": seq_len, "flash_attention_version": version})
    x = inputs_from_job(job, P)
    forward, _ = attention_time_s(x.micro_batch * x.seq_len, heads, x, P)
    return float(forward)


def test_flash_attention_1_runs_at_its_relative_speed_of_flash_attention_2_at_head_dim_128():
    heads = GPT_LAYER["hidden"] // 128
    ratio = _attention_forward_s(1, heads) / _attention_forward_s(2, heads)
    assert ratio == pytest.approx(1 / P.flash1_relative_speed, rel=1e-12)


def test_flash_attention_1_rate_does_not_depend_on_head_width_but_flash_attention_2_does():
    # same hidden size, so the same attention FLOPs; only the head width differs (64 vs 128)
    narrow, wide = GPT_LAYER["hidden"] // 64, GPT_LAYER["hidden"] // 128
    assert _attention_forward_s(1, narrow) == pytest.approx(_attention_forward_s(1, wide), rel=1e-12)
    # FlashAttention-3 paper Fig. 5-6 (H100): FlashAttention-2 at head dim 64 is 1.11-1.14x slower than at 128
    assert _attention_forward_s(2, narrow) > 1.1 * _attention_forward_s(2, wide)


def test_an_older_attention_kernel_slows_long_sequences_much_more_than_short_ones():
    def slowdown(seq_len, micro_batch):
        model = {**GPT_LAYER, "max_positions": seq_len}
        training = {"seq_len": seq_len, "global_batch": 8 * micro_batch, "micro_batch": micro_batch}
        new, old = (estimate(make_job(model=model, training={**training, "flash_attention_version": v}))
                    for v in (2, 1))
        return new.tokens_per_s / old.tokens_per_s

    # equal tokens per micro-batch, so only the attention's share of the work differs
    assert slowdown(32768, 1) > 1.2 * slowdown(1024, 32) > 1.0


def test_eager_elementwise_work_moves_more_bytes_and_slows_the_step():
    fused_job, eager_job = (make_job(training={"fused_kernels": fused}) for fused in (True, False))
    fused_x, eager_x = (inputs_from_job(j, P) for j in (fused_job, eager_job))
    fused_bytes, eager_bytes = (float(elementwise_bytes_per_token(x, P)) for x in (fused_x, eager_x))
    assert P.eager_elementwise_factor * 0.9 < eager_bytes / fused_bytes <= P.eager_elementwise_factor
    out = evaluate(stack_inputs([fused_x, eager_x]), P)
    assert out.step_time_s[1] > out.step_time_s[0]


def test_eager_kernels_make_a_launch_bound_step_longer():
    # a tiny model at tp 8: the host issues kernels slower than the GPU runs them
    tiny = {**GPT_LAYER, "n_layers": 12, "hidden": 512, "n_heads": 8, "ffn_hidden": 2048}
    runs = [estimate(make_job(model=tiny, training={"tp": 8, "seq_len": 512, "global_batch": 8,
                                                    "fused_kernels": fused})) for fused in (True, False)]
    fused_launch, eager_launch = (r.step_breakdown_s["launch_overhead"] for r in runs)
    assert fused_launch > 0
    assert eager_launch > fused_launch


@pytest.mark.parametrize("version", [0, 3])
def test_an_unknown_flash_attention_version_is_an_error_naming_the_field(version):
    with pytest.raises(TrainrigError, match="flash_attention_version"):
        make_job(training={"flash_attention_version": version})


def test_megatrons_fused_softmax_needs_score_matrices_in_fours_or_it_runs_eagerly():
    # 16 heads over tp 8 = 2 heads per GPU: one sequence gives 2 score matrices (eager fallback),
    # two sequences give 4 (fused kernel)
    def softmax_mode(micro_batch, flash=False, fused=True):
        job = make_job(training={"tp": 8, "micro_batch": micro_batch, "global_batch": 8 * micro_batch,
                                 "flash_attention": flash, "fused_kernels": fused})
        return float(eager_softmax(inputs_from_job(job, P)))

    assert softmax_mode(1) == 1.0
    assert softmax_mode(2) == 0.0
    assert softmax_mode(2, fused=False) == 1.0
    assert softmax_mode(1, flash=True) == 0.0


def test_an_eager_softmax_moves_37_bytes_per_score_instead_of_4():
    tiny = {**GPT_LAYER, "n_layers": 12, "hidden": 512, "n_heads": 8, "ffn_hidden": 2048}
    training = {"tp": 2, "micro_batch": 1, "global_batch": 4, "seq_len": 1024, "flash_attention": False}
    fused_x, eager_x = (inputs_from_job(make_job(model=tiny, training={**training, "fused_kernels": fused}), P)
                        for fused in (True, False))
    assert float(eager_softmax(fused_x)) == 0.0 and float(eager_softmax(eager_x)) == 1.0
    scores_per_token = tiny["n_heads"] / 2 * 1024 * tiny["n_layers"]
    extra = float(elementwise_bytes_per_token(eager_x, P) - elementwise_bytes_per_token(fused_x, P))
    eager_rest = (P.eager_elementwise_factor - 1) * (float(elementwise_bytes_per_token(fused_x, P))
                                                     - 4 * scores_per_token)
    assert extra == pytest.approx((37 - 4) * scores_per_token + eager_rest, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 10), st.floats(0, 10), st.floats(1.01, 50))
def test_host_and_gpu_overlap_lies_between_the_slower_side_and_the_sum(host, gpu, exponent):
    elapsed = float(overlapped_s(np.array(host), np.array(gpu), exponent))
    assert max(host, gpu) * (1 - 1e-12) <= elapsed <= (host + gpu) * (1 + 1e-12)
    # more of either side never shortens the pass
    assert float(overlapped_s(np.array(host * 1.1), np.array(gpu), exponent)) >= elapsed * (1 - 1e-12)


def test_host_and_gpu_overlap_costs_most_when_the_two_are_equal():
    k = P.host_gpu_overlap_exponent
    equal = float(overlapped_s(np.array(1.0), np.array(1.0), k))
    assert equal == pytest.approx(2 ** (1 / k), rel=1e-12)
    lopsided = float(overlapped_s(np.array(1.0), np.array(0.1), k))
    assert lopsided - 1.0 < 0.01 < equal - 1.0
