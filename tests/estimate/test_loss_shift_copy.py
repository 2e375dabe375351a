"""`training.loss_shift_copy`: the shifted contiguous copy of the logits that Hugging Face's loss made
before January 2025 (memory.logits_bytes, core._logits_times_s)."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import logits_bytes
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA = {"n_layers": 4, "hidden": 1024, "n_heads": 8, "n_kv_heads": 8, "ffn_hidden": 2816, "vocab": 32000,
         "gated_mlp": True}


def job(**training):
    return make_job(model=LLAMA, hardware={"n_gpus": 1, "gpus_per_node": 1},
                    training={"framework": "hf-trainer", "seq_len": 2048, "global_batch": 2, "micro_batch": 2,
                              **training})


def loss_bytes(a_job):
    return float(logits_bytes(inputs_from_job(a_job, P), P))


@pytest.mark.parametrize(("upcast", "extra_bytes"), [(True, 2.0), (False, 0.0)])
def test_the_copy_raises_the_peak_only_where_the_forward_outlasts_the_backward(upcast, extra_bytes):
    # upcast: 16-bit logits, their fp32 upcast, the fp32 copy and the log-softmax in the forward (2 + 4 + 4 + 4)
    # against the backward's 12; in 16 bits 2 + 2 + 2 against 6
    tokens, vocab = 2 * 2048, 32000
    extra = loss_bytes(job(loss_shift_copy=True, loss_upcast=upcast)) - loss_bytes(job(loss_upcast=upcast))
    assert extra == pytest.approx(tokens * vocab * extra_bytes, rel=1e-12, abs=1e-3)


@pytest.mark.parametrize("loss", ["fused", "chunked", "fused_linear"])
def test_only_the_full_loss_copies(loss):
    assert loss_bytes(job(loss=loss, loss_shift_copy=True)) == loss_bytes(job(loss=loss))


def test_the_copy_costs_memory_and_time():
    plain, copied = estimate(job(), advise_fit=False), estimate(job(loss_shift_copy=True), advise_fit=False)
    assert copied.memory_per_gpu_gib > plain.memory_per_gpu_gib
    assert copied.step_time_s > plain.step_time_s
