"""Hybrid models (`model.layer_pattern`: Mamba-2, attention, MLP and MoE layers, one block each, as
Megatron-Core's hybrid_override_pattern writes them): validation, a Mamba-2 mixer's parameters and
FLOPs counted by hand, and a transformer written as a pattern of attention and MLP blocks, which
must estimate as the transformer itself."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.flops import model_flops_per_token
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P
from trainrig.specs import ModelSpec

TRANSFORMER = {"n_layers": 8, "hidden": 2048, "n_heads": 16, "n_kv_heads": 4, "ffn_hidden": 5632, "vocab": 32000}
# a small Mamba-2 shape: 4 heads of 16 (d_inner 64), 2 groups of state 8
MIXER = {"hidden": 64, "n_heads": 4, "ffn_hidden": 128, "vocab": 1000, "mamba_heads": 4, "mamba_head_dim": 16,
         "mamba_groups": 2, "mamba_state_dim": 8, "mamba_conv_kernel": 4, "mamba_chunk_size": 32}


def as_pattern(model: dict, mlp: str = "-") -> dict:
    """The same transformer as alternating attention and MLP blocks: twice the layers."""
    return {**model, "n_layers": 2 * model["n_layers"], "layer_pattern": ("*" + mlp) * model["n_layers"]}


def pair(training: dict, model: dict = TRANSFORMER, mlp: str = "-"):
    settings = {"seq_len": 4096, "global_batch": 64, "flash_attention": True, **training}
    return [estimate(make_job(model=m, training=settings), advise_fit=False) for m in (model, as_pattern(model, mlp))]


@pytest.mark.parametrize("training", [
    {}, {"tp": 2, "sequence_parallel": True}, {"tp": 4, "sequence_parallel": True, "tp_comm_overlap": True},
    {"method": "lora"}, {"cp": 2}, {"precision": "fp8", "fp8_recipe": "delayed"}, {"pp": 2, "micro_batch": 1},
])
def test_a_transformer_written_as_a_pattern_estimates_as_itself(training):
    plain, hybrid = pair(training)
    assert hybrid.config["n_params"] == plain.config["n_params"]
    assert hybrid.step_time_s == pytest.approx(plain.step_time_s, rel=1e-9)
    assert hybrid.memory_per_gpu_gib == pytest.approx(plain.memory_per_gpu_gib, rel=1e-9)
    assert hybrid.model_tflops_per_gpu == pytest.approx(plain.model_tflops_per_gpu, rel=1e-9)


def test_an_moe_transformer_written_as_a_pattern_estimates_as_itself():
    plain, hybrid = pair({"ep": 4}, {**TRANSFORMER, "n_experts": 8, "top_k": 2}, mlp="E")
    assert hybrid.step_time_s == pytest.approx(plain.step_time_s, rel=1e-9)
    assert hybrid.memory_per_gpu_gib == pytest.approx(plain.memory_per_gpu_gib, rel=1e-9)


def test_full_recompute_keeps_every_blocks_input():
    # a hybrid checkpoints each block, so it keeps two inputs per transformer layer: more memory
    plain, hybrid = pair({"recompute": "full"})
    assert hybrid.step_time_s == pytest.approx(plain.step_time_s, rel=1e-9)
    extra_gib = 8 * 4096 * 2048 * 2 / 2**30  # one more hidden-wide 16-bit tensor per layer
    saved = hybrid.memory_breakdown_gib["activations"] - plain.memory_breakdown_gib["activations"]
    assert saved == pytest.approx(extra_gib, rel=1e-9)


def test_a_mamba_mixer_counted_by_hand():
    model = ModelSpec(n_layers=2, layer_pattern="M-", **MIXER)
    inner, bc, heads = 64, 2 * 2 * 8, 4
    in_width = 2 * inner + bc + heads  # z, x, B, C, dt
    mixer = 64 * in_width + inner * 64 + (inner + bc) * (4 + 1) + 3 * heads + inner
    mlp = 3 * 64 * 128  # gated: gate, up and down
    norms = 2 * 64 + 64  # two blocks and the final norm
    assert model.n_params == 1000 * 64 * 2 + mixer + mlp + norms
    x = inputs_from_job(make_job(model={"n_layers": 2, "layer_pattern": "M-", **MIXER},
                                 training={"seq_len": 256, "global_batch": 8}), P)
    q, n, p = 32, 8, 16
    scan = 2 * q * n * 2 + 4 * n * p * heads + 2 * q * p * heads + 2 * 4 * (inner + bc)
    gemms = 2 * 64 * in_width + 2 * inner * 64 + 2 * 64 * 128 * 3 + 2 * 64 * 1000
    assert float(model_flops_per_token(x)) == pytest.approx(3 * gemms + 3 * scan)


def test_mamba_layers_take_time_and_memory_as_they_widen():
    def run(heads):
        model = {"n_layers": 8, "layer_pattern": "M-M*M-M-", "hidden": 1024, "n_heads": 8, "ffn_hidden": 4096,
                 "vocab": 32000, "mamba_heads": heads}
        return estimate(make_job(model=model, training={"seq_len": 4096, "global_batch": 64}), advise_fit=False)
    narrow, wide = run(16), run(64)
    assert wide.step_breakdown_s["compute"] > narrow.step_breakdown_s["compute"]
    assert wide.memory_breakdown_gib["activations"] > narrow.memory_breakdown_gib["activations"]
    assert any("Mamba-2" in line for line in wide.assumptions)


@pytest.mark.parametrize(("model", "field"), [
    ({"n_layers": 4, "layer_pattern": "M-M"}, "model.layer_pattern"),
    ({"n_layers": 4, "layer_pattern": "M-Mx"}, "model.layer_pattern"),
    ({"n_layers": 4, "layer_pattern": "M-ME"}, "model.layer_pattern"),
    ({"n_layers": 4, "layer_pattern": "M-M-", "n_experts": 8, "top_k": 2}, "model.layer_pattern"),
    ({"n_layers": 4, "mamba_heads": 8}, "model.mamba_heads"),
    ({"n_layers": 4, "layer_pattern": "M-M-", "mamba_heads": 6, "mamba_groups": 4}, "model.mamba_groups"),
])
def test_a_pattern_that_cannot_be_is_refused(model, field):
    with pytest.raises(TrainrigError) as error:
        ModelSpec(**{**MIXER, "n_heads": 8, "hidden": 512, **model})
    assert error.value.field == field


def test_tensor_parallelism_must_split_the_mamba_groups():
    model = {**MIXER, "n_layers": 2, "layer_pattern": "M*", "hidden": 512, "n_heads": 8, "mamba_heads": 8}
    with pytest.raises(TrainrigError) as error:
        make_job(model=model, training={"tp": 4})
    assert error.value.field == "training.tp"
