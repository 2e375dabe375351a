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


@pytest.mark.parametrize(("upcast", "copy_bytes"), [(True, 4.0), (False, 2.0)])
def test_the_copy_is_one_more_logits_tensor_in_the_loss_precision(upcast, copy_bytes):
    tokens, vocab = 2 * 2048, 32000
    extra = loss_bytes(job(loss_shift_copy=True, loss_upcast=upcast)) - loss_bytes(job(loss_upcast=upcast))
    assert extra == pytest.approx(tokens * vocab * copy_bytes, rel=1e-12)


@pytest.mark.parametrize("loss", ["fused", "chunked", "fused_linear"])
def test_only_the_full_loss_copies(loss):
    assert loss_bytes(job(loss=loss, loss_shift_copy=True)) == loss_bytes(job(loss=loss))


def test_the_copy_costs_memory_and_time():
    plain, copied = estimate(job(), advise_fit=False), estimate(job(loss_shift_copy=True), advise_fit=False)
    assert copied.memory_per_gpu_gib > plain.memory_per_gpu_gib
    assert copied.step_time_s > plain.step_time_s
