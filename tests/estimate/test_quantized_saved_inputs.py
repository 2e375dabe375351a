"""Transformer Engine keeps a linear's input for its weight gradient in the quantized format under
fp8 (FrameworkSpec.low_precision_saves_quantized_inputs: Megatron-Core, NeMo): 1 byte per element
instead of 2, and a 1-byte copy of the attention output beside the one the attention kernel keeps.
torchao's Float8Linear (torchtitan) keeps the 16-bit input. Counted by hand per token and layer."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import activation_bytes_per_layer
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

DENSE = {"n_layers": 4, "hidden": 1024, "n_heads": 8, "ffn_hidden": 2816, "vocab": 32000}
MOE = {**DENSE, "n_experts": 8, "top_k": 2, "expert_ffn_hidden": 512, "n_shared_experts": 1}
SEQ = 1024


def saved_per_token(model, framework, precision):
    job = make_job(model=model, hardware={"gpu": "H100-SXM5-80GB", "n_gpus": 1},
                   training={"framework": framework, "precision": precision, "seq_len": SEQ, "global_batch": 8})
    return float(activation_bytes_per_layer(inputs_from_job(job, P))[0]) / SEQ


def test_megatron_keeps_the_norm_outputs_and_the_down_input_in_fp8_and_o_gets_a_copy():
    saving = saved_per_token(DENSE, "megatron", "bf16") - saved_per_token(DENSE, "megatron", "fp8")
    # q/k/v's and the MLP's normalized inputs (1024 each) and the down projection's (2816) lose a
    # byte per element; o's input (the 1024-wide attention output) gains a 1-byte copy
    assert saving == pytest.approx(2 * 1024 + 2816 - 1024)


def test_torchtitan_keeps_its_16_bit_inputs():
    assert saved_per_token(DENSE, "torchtitan", "fp8") == saved_per_token(DENSE, "torchtitan", "bf16")


def test_experts_keep_their_permuted_tokens_and_down_inputs_quantized():
    dense_saving = 2 * 1024 + 2816 - 1024  # the attention side and the dense MLP, as above
    moe_saving = saved_per_token(MOE, "megatron", "bf16") - saved_per_token(MOE, "megatron", "fp8")
    # every layer is MoE here: the norm outputs and o as above, then per token 2 routed copies of
    # the 1024-wide input and of the 512-wide down input, and the shared expert's 512-wide one
    assert moe_saving == pytest.approx(dense_saving - 2816 + 2 * (1024 + 512) + 512)
