"""LoRA on a mixture of experts: PEFT's target_modules adapt every routed expert's MLP linears
(transformers 4.x nn.ModuleList experts; 5.x fused 3-D expert weights, adapted per expert), so
the adapters and their optimizer states grow with the expert count and split over the expert group."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import trainable_parameter_counts
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

# 4 MoE layers of 8 experts of 128 (gated), hidden 256, one shared expert of 256
MOE = {"n_layers": 4, "hidden": 256, "n_heads": 4, "ffn_hidden": 512, "vocab": 1000, "n_experts": 8, "top_k": 2,
       "expert_ffn_hidden": 128, "n_shared_experts": 1, "shared_ffn_hidden": 256}
ATTENTION = ["q", "k", "v", "o"]
RANK = 8


def _trainable(targets, ep=1, n_gpus=1):
    job = make_job(model=MOE, hardware={"n_gpus": n_gpus},
                   training={"method": "lora", "lora_rank": RANK, "lora_targets": targets, "ep": ep,
                             "global_batch": n_gpus, "seq_len": 256})
    return trainable_parameter_counts(inputs_from_job(job, P, python_floats=True))


def test_mlp_targets_adapt_every_routed_expert_and_the_shared_one():
    attention_dense, attention_experts = _trainable(ATTENTION)
    dense, experts = _trainable(ATTENTION + ["gate", "up", "down"])
    assert attention_experts == 0.0
    # gate, up and down per expert: rank·(fan_in + fan_out) each, 8 experts, 4 layers
    assert experts == pytest.approx(4 * 8 * RANK * 3 * (256 + 128))
    # the shared expert's three linears beside the attention adapters
    assert dense - attention_dense == pytest.approx(4 * RANK * 3 * (256 + 256))


def test_expert_adapters_split_over_the_expert_group():
    _, whole = _trainable(ATTENTION + ["gate", "up", "down"])
    _, quarter = _trainable(ATTENTION + ["gate", "up", "down"], ep=4, n_gpus=4)
    assert quarter == pytest.approx(whole / 4)
