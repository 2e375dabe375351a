"""Issue 11's last terms, from first principles: the cost of AutoGPTQ's torch dequantization per
weight and use, the loss in the training precision (`loss_upcast: false`), and the fit verdicts
of the three published rows those terms (and the source's own limits) decide."""

from __future__ import annotations

import numpy as np
import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.catalog.cases import load_cases
from trainrig.estimate.core import _layer_times_s, _qlora_dequant_s
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.job_fields import DEQUANT_BYTES_PER_WEIGHT, DEQUANT_STREAM_FRACTION
from trainrig.estimate.memory import memory_state
from trainrig.estimate.params import DEFAULT_PARAMETERS as P
from trainrig.units import GIB

H, FFN, LAYERS = 1024, 2816, 8
LLAMA = {"n_layers": LAYERS, "hidden": H, "n_heads": 8, "n_kv_heads": 8, "ffn_hidden": FFN, "vocab": 32000}
ONE_GPU = {"gpu": "A100-SXM4-80GB", "n_gpus": 1, "gpus_per_node": 1}
LINEARS_PER_LAYER = H * 3 * H + H * H + 3 * H * FFN  # fused qkv (MHA), o, gate, up, down; no biases


def job(model=None, **training):
    return make_job(model=model or LLAMA, hardware=ONE_GPU,
                    training={"seq_len": 512, "global_batch": 8, **training})


@pytest.fixture(scope="module")
def cases():
    return {c.id: c for c in load_cases()}


# ---- AutoGPTQ's dequantization ------------------------------------------------------------------


def test_gptq_dequantization_moves_its_bytes_per_layer_weight_at_half_the_stream_rate():
    x = inputs_from_job(job(method="qlora", quantization="gptq-int4"), P)
    bytes_at_stream_rate = LINEARS_PER_LAYER * 16.5 / 0.5  # 16.5 B per weight, 1-byte TensorIterator kernels
    assert DEQUANT_BYTES_PER_WEIGHT["gptq-int4"] == pytest.approx(16.5)
    assert DEQUANT_STREAM_FRACTION["gptq-int4"] == 0.5
    assert float(_qlora_dequant_s(x)) * float(x.hbm_bandwidth_gbs) * 1e9 == pytest.approx(bytes_at_stream_rate)


def test_single_kernel_dequantizers_stream_at_the_full_rate():
    x = inputs_from_job(job(method="qlora", quantization="nf4"), P)
    per_weight = 0.5 + 4 / 64 + 2  # read the 4-bit storage and its absmax, write 16 bits
    moved = float(_qlora_dequant_s(x)) * float(x.hbm_bandwidth_gbs) * 1e9
    assert moved == pytest.approx(LINEARS_PER_LAYER * per_weight)


def test_gptq_dequantization_grows_with_the_layer_weights_it_reads_and_not_with_the_vocabulary():
    base = float(_qlora_dequant_s(inputs_from_job(job(method="qlora", quantization="gptq-int4"), P)))
    wider = float(_qlora_dequant_s(inputs_from_job(
        job(model={**LLAMA, "ffn_hidden": 2 * FFN}, method="qlora", quantization="gptq-int4"), P)))
    bigger_vocab = float(_qlora_dequant_s(inputs_from_job(
        job(model={**LLAMA, "vocab": 128000}, method="qlora", quantization="gptq-int4"), P)))
    # the MLP's three matrices double; the embedding and head stay 16-bit and are never dequantized
    assert wider / base == pytest.approx((LINEARS_PER_LAYER + 3 * H * FFN) / LINEARS_PER_LAYER)
    assert bigger_vocab == pytest.approx(base)
    assert float(_qlora_dequant_s(inputs_from_job(job(method="lora"), P))) == 0.0


def test_a_full_recompute_dequantizes_once_more_and_the_saved_copy_serves_the_backward():
    from trainrig.estimate.core import _gemm_times_s
    for recompute in ("none", "full"):
        x = inputs_from_job(job(method="qlora", quantization="gptq-int4", recompute=recompute), P)
        y = inputs_from_job(job(method="qlora", quantization="nf4", recompute=recompute), P)
        tokens = 512
        with np.errstate(divide="ignore", invalid="ignore"):  # as evaluate() runs them (unused MoE terms)
            gx, gy = _gemm_times_s(x, P), _gemm_times_s(y, P)
        (fx, bx, rx), (fy, by, ry) = _layer_times_s(x, P, tokens, gx), _layer_times_s(y, P, tokens, gy)
        dx, dy = float(_qlora_dequant_s(x)), float(_qlora_dequant_s(y))
        assert float(fx - fy) == pytest.approx(dx - dy)  # one dequantization per forward
        assert float(bx - by) == pytest.approx(-dy)  # AutoGPTQ's backward reuses the saved 16-bit weight
        assert float(rx - ry) == pytest.approx((dx - dy) if recompute == "full" else 0.0)


# ---- the loss in the training precision -----------------------------------------------------------


def test_a_16_bit_loss_saves_exactly_half_of_the_full_losses_bytes_per_logit():
    tokens, vocab = 512, 32000
    upcast = memory_state(inputs_from_job(job(loss="full"), P), P)
    native = memory_state(inputs_from_job(job(loss="full", loss_upcast=False), P), P)
    assert float(upcast["phase"]) == float(native["phase"]) == 0.0  # both peak at the end of the forward
    saved = tokens * vocab * P.logits_bytes_per_element / 2  # fp32 log-softmax and gradients → 16-bit
    assert float(upcast["allocated"] - native["allocated"]) == pytest.approx(saved)


def test_a_16_bit_loss_streams_half_the_bytes_per_logit():
    from trainrig.estimate.core import _logits_times_s
    gemm = {"logits": (0.0, 0.0, 0.0)}  # the output projection alone, left out
    upcast = inputs_from_job(job(loss="full"), P)
    native = inputs_from_job(job(loss="full", loss_upcast=False), P)
    fwd_u, bwd_u = _logits_times_s(upcast, 512, gemm)
    fwd_n, bwd_n = _logits_times_s(native, 512, gemm)
    assert float(fwd_u + bwd_u) * float(upcast.hbm_bandwidth_gbs) * 1e9 == pytest.approx(512 * 32000 * 12)
    assert float(fwd_n + bwd_n) == pytest.approx(float(fwd_u + bwd_u) / 2)


@pytest.mark.parametrize("loss", ["chunked", "fused", "fused_linear"])
def test_loss_upcast_only_changes_the_full_loss(loss):
    a = estimate(job(loss=loss)).memory_allocated_gib
    b = estimate(job(loss=loss, loss_upcast=False)).memory_allocated_gib
    assert a == pytest.approx(b)


def test_an_fp32_run_has_no_16_bit_loss_to_fall_back_to():
    a = estimate(job(precision="fp32")).memory_allocated_gib
    b = estimate(job(precision="fp32", loss_upcast=False)).memory_allocated_gib
    assert a == pytest.approx(b)


@pytest.mark.parametrize("training", [
    {}, {"method": "lora"}, {"method": "qlora", "quantization": "gptq-int4", "recompute": "full"},
    {"zero": 2, "framework": "deepspeed"}, {"micro_batch": 4, "global_batch": 16, "recompute": "selective"},
])
def test_a_16_bit_loss_never_raises_memory(training):
    upcast = estimate(job(**training))
    native = estimate(job(loss_upcast=False, **training))
    for key in ("memory_allocated_gib", "memory_reserved_gib", "memory_per_gpu_gib"):
        assert getattr(native, key) <= getattr(upcast, key) + 1e-12


def test_the_qwen_deepspeed_rows_compute_their_loss_in_16_bits_and_the_autocast_rows_in_fp32(cases):
    qwen = [c for c in cases.values() if c.id.startswith("qwen1_")]
    assert qwen
    for case in qwen:
        # DeepSpeed's engine casts the module and accelerate turns autocast off under it; HF Trainer
        # with --bf16 alone runs under autocast, which computes cross-entropy in fp32
        assert case.job.training.loss_upcast == (case.job.framework.id != "deepspeed"), case.id


# ---- the three verdicts ---------------------------------------------------------------------------


def _with(case, **training):
    return case.job.model_copy(update={"training": case.job.training.model_copy(update=training)})


def test_gpt3_2p7b_at_8k_cannot_have_run_four_sequences_per_gpu_without_recompute(cases):
    case = cases["fa2paper_gpt3_2p7b_8k_fa2_8xa100"]
    four = estimate(_with(case, micro_batch=4))
    s, b, h, layers = 8192, 4, 2560, 32
    # Korthikanti et al. 2022: at least 34·s·b·h bytes per layer with flash attention (no s² term)
    lower_bound = 34 * s * b * h * layers
    assert four.memory_breakdown_gib["activations"] * GIB >= lower_bound
    assert lower_bound > case.job.hardware.gpu.memory_gib * GIB  # above the card before any weight
    assert not four.fits
    assert case.job.training.micro_batch == 2  # what the row now infers the paper ran


@pytest.mark.parametrize("ident", ["fa2paper_gpt3_2p7b_8k_fa1_8xa100", "fa2paper_gpt3_2p7b_8k_fa2_8xa100"])
def test_gpt3_2p7b_at_8k_fits_at_two_sequences_per_gpu(cases, ident):
    assert estimate(cases[ident].job).fits


def test_qwen_72b_qlora_at_8192_fits_once_its_loss_runs_in_fp16(cases):
    case = cases["qwen1_72b_qlora_s8192"]
    native = estimate(case.job)
    upcast = estimate(_with(case, loss_upcast=True))
    tokens, vocab = 8192, 152064
    # without the shifted copy, exactly the fp32 log-softmax and its gradients, now 16-bit: 6 bytes per logit
    plain = estimate(_with(case, loss_shift_copy=False))
    plain_upcast = estimate(_with(case, loss_shift_copy=False, loss_upcast=True))
    difference = (plain_upcast.memory_allocated_gib - plain.memory_allocated_gib) * GIB
    assert difference == pytest.approx(tokens * vocab * P.logits_bytes_per_element / 2, rel=1e-9)
    # with it (modeling_qwen.py), upcast the forward holds 2 + 4 + 4 + 4 bytes per logit, in 16 bits 6
    difference = (upcast.memory_allocated_gib - native.memory_allocated_gib) * GIB
    assert difference == pytest.approx(tokens * vocab * 8, rel=1e-9)
    assert native.fits
    assert not upcast.fits
