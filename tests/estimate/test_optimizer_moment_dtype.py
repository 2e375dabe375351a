"""`training.optimizer_moment_dtype` (Megatron-Core's precision-aware optimizer: `exp_avg_dtype`,
`exp_avg_sq_dtype`): the moments' bytes per parameter in memory and in the optimizer step's
traffic, counted by hand."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.job_fields import optimizer_state_bytes, optimizer_step_bytes


def training(**fields):
    return make_job(training={"framework": "megatron", **fields}).training


def test_bf16_moments_halve_adamw_moments_beside_the_fp32_master():
    # fp32 master 4 B + m and v at 2 B each (fp32: 4 + 2·4 = 12)
    assert optimizer_state_bytes(training(optimizer_moment_dtype="bf16")) == 4 + 2 * 2
    assert optimizer_state_bytes(training(optimizer_moment_dtype="fp32")) == optimizer_state_bytes(training()) == 12


def test_the_step_reads_and_writes_each_moment_in_its_own_type():
    # AdamW's 34 B per parameter with fp32 moments; each of m and v read and written at 2 B fewer
    assert optimizer_step_bytes(training()) == 34
    assert optimizer_step_bytes(training(optimizer_moment_dtype="bf16")) == 34 - 2 * 2 * 2


def test_pure_bf16_training_can_keep_fp32_moments():
    # no master copy; m and v in fp32
    t = training(master_weights=False, optimizer_moment_dtype="fp32")
    assert optimizer_state_bytes(t) == 2 * 4
    assert optimizer_state_bytes(training(master_weights=False)) == 2 * 2


def test_sgd_momentum_follows_the_type():
    assert optimizer_state_bytes(training(optimizer="sgd", optimizer_moment_dtype="bf16")) == 4 + 2


def test_bitsandbytes_optimizers_keep_their_own_states():
    for optimizer in ("adam8bit", "paged_adamw", "paged_adamw8bit"):
        with pytest.raises(TrainrigError, match="optimizer_moment_dtype"):
            training(optimizer=optimizer, optimizer_moment_dtype="bf16")


def test_the_estimate_holds_two_thirds_of_the_optimizer_memory():
    plain = estimate(make_job(training={"framework": "megatron"}), advise_fit=False)
    narrow = estimate(make_job(training={"framework": "megatron", "optimizer_moment_dtype": "bf16"}), advise_fit=False)
    assert narrow.memory_breakdown_gib["optimizer"] == pytest.approx(plain.memory_breakdown_gib["optimizer"] * 8 / 12)
    assert narrow.config["optimizer_moment_dtype"] == "bf16"
