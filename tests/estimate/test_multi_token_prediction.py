"""Multi-token prediction modules (`training.mtp_layers`; DeepSeek-V3 §2.2, Megatron-Core
--mtp-num-layers), counted by hand on a small dense model: each is one more layer, a 2h → h
projection of [norm(h); norm(embedding)], three norms and the output head and loss again, on the
last pipeline stage."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.estimate.flops import model_flops_per_token
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import activation_bytes_per_layer, local_parameter_counts, logits_bytes, memory_state
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

H, FFN, V, LAYERS, SEQ = 1024, 2816, 32000, 8, 2048
MODEL = {"n_layers": LAYERS, "hidden": H, "n_heads": 8, "ffn_hidden": FFN, "vocab": V}
LAYER_WEIGHTS = 4 * H * H + 3 * H * FFN
NORM = H  # one RMSNorm's scale


def job(pp=1, **training):
    return make_job(model=MODEL, hardware={"n_gpus": pp, "gpus_per_node": 8},
                    training={"pp": pp, "seq_len": SEQ, "global_batch": 8, **training})


def x_of(pp=1, **training):
    return inputs_from_job(job(pp, **training), P)


def test_model_flops_add_a_layer_the_projection_and_the_head_per_module():
    extra = float(model_flops_per_token(x_of(mtp_layers=1)) - model_flops_per_token(x_of()))
    gemms = LAYER_WEIGHTS + 2 * H * H + H * V  # multiply-adds per token
    attention = 2 * 2 * SEQ * 8 * 128  # QKᵀ and A·V over the whole sequence (the FLOP convention)
    assert extra == pytest.approx(3 * (2 * gemms + attention))


def test_one_stage_holds_the_modules_weights():
    extra = float(local_parameter_counts(x_of(mtp_layers=1))[0] - local_parameter_counts(x_of())[0])
    assert extra == pytest.approx(LAYER_WEIGHTS + 2 * NORM + 2 * H * H + 3 * NORM)


def test_the_last_stage_holds_them_with_the_head_and_a_copy_of_the_embedding():
    # pp 2: 4 layers each; the last stage's head, MTP module and embedding copy outweigh the first's embedding
    with_mtp, without = x_of(pp=2, mtp_layers=1), x_of(pp=2)
    layers = 4 * (LAYER_WEIGHTS + 2 * NORM) + NORM  # and the final norm
    assert float(local_parameter_counts(without)[0]) == pytest.approx(layers + V * H)
    module = LAYER_WEIGHTS + 2 * NORM + 2 * H * H + 3 * NORM
    assert float(local_parameter_counts(with_mtp)[0]) == pytest.approx(layers + V * H + module + V * H)


def test_the_module_keeps_a_layers_activations_and_its_own_logits():
    # one stage, one micro-batch: the forward's end holds one more layer's saved set and logits
    plain, mtp = memory_state(x_of(), P), memory_state(x_of(mtp_layers=1), P)
    assert float(plain["phase"]) == float(mtp["phase"]) == 0.0  # both peak at the end of the forward
    x = x_of()
    expected = float(activation_bytes_per_layer(x)[0] + logits_bytes(x, P))
    assert float(mtp["activations"] - plain["activations"]) == pytest.approx(expected)


def test_modules_slow_the_step_and_cost_memory():
    plain, mtp = estimate(job()), estimate(job(mtp_layers=1))
    assert mtp.step_time_s > plain.step_time_s and mtp.memory_per_gpu_gib > plain.memory_per_gpu_gib
