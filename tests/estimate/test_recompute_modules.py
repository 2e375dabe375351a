"""Megatron-Core's selective recompute by module (`training.recompute_modules`), each module's saved
bytes and repeated FLOPs counted by hand on small models: MLA's assembled q/k/v, the standalone
norms, the experts' activation output, a dense MLP, an MoE layer, the shared experts."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.flops import hardware_flops_per_token
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import activation_bytes_per_layer
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

SEQ = 256
# 4 heads of query/key width 24 (16 + 8 rotary), value width 16; key/value latent 32, no query latent
MLA = {"n_layers": 2, "hidden": 64, "n_heads": 4, "head_dim": 24, "v_head_dim": 16, "qk_rope_head_dim": 8,
       "kv_lora_rank": 32, "ffn_hidden": 128, "vocab": 1000}
# every layer MoE: 8 experts of width 32, top 2, one shared expert of width 32 (gated)
MOE = {"n_layers": 2, "hidden": 64, "n_heads": 4, "ffn_hidden": 128, "vocab": 1000, "n_experts": 8, "top_k": 2,
       "expert_ffn_hidden": 32, "n_shared_experts": 1, "shared_ffn_hidden": 32, "gated_mlp": True}
DENSE = {"n_layers": 2, "hidden": 64, "n_heads": 4, "ffn_hidden": 128, "vocab": 1000, "gated_mlp": True}


def job(model, modules=None, **training):
    extra = {} if modules is None else {"recompute_modules": modules}
    return make_job(model=model, hardware={"n_gpus": 1, "gpus_per_node": 1},
                    training={"framework": "megatron", "seq_len": SEQ, "global_batch": 8, "flash_attention": True,
                              **extra, **training})


def saved_per_token(model, modules=None, **training):
    """Bytes one layer keeps for its backward, per token, on the one GPU."""
    return float(activation_bytes_per_layer(inputs_from_job(job(model, modules, **training), P))[0]) / SEQ


def repeated_flops(model, modules=None, **training):
    """FLOPs per token recompute adds, over all layers."""
    x = inputs_from_job(job(model, modules, **training), P)
    return float(hardware_flops_per_token(x) - hardware_flops_per_token(
        inputs_from_job(job(model, **{**training, "recompute": "none"}), P)))


def test_a_module_list_means_selective_and_repeats_are_dropped():
    spec = job(DENSE, ["mlp", "mlp", "core_attn"]).training
    assert (spec.recompute, spec.recompute_modules) == ("selective", ["mlp", "core_attn"])
    assert job(DENSE, ["mlp"], recompute="full").training.recompute == "full"


def test_an_unknown_module_is_an_error_naming_the_field():
    with pytest.raises(TrainrigError, match="recompute_modules"):
        job(DENSE, ["attention"])


def test_core_attn_alone_is_megatrons_selective_recompute():
    listed = estimate(job(MLA, ["core_attn"]), advise_fit=False).model_dump()
    plain = estimate(job(MLA, recompute="selective"), advise_fit=False).model_dump()
    # the same numbers; only the configuration echoed and the assumption the list makes unneeded differ
    assert {k for k in listed if listed[k] != plain[k]} == {"config", "assumptions"}
    assert listed["config"]["recompute_modules"] == ["core_attn"]
    assert not any("selective recompute" in line for line in listed["assumptions"])


def test_the_list_is_inert_outside_selective_recompute():
    for policy in ("none", "full"):
        listed = estimate(job(MOE, ["moe", "layernorm"], recompute=policy), advise_fit=False)
        plain = estimate(job(MOE, recompute=policy), advise_fit=False)
        assert listed.memory_per_gpu_gib == plain.memory_per_gpu_gib
        assert listed.step_time_s == plain.step_time_s


def test_mla_up_proj_drops_the_assembled_q_k_and_v():
    # q and k: 4 heads × 24, v: 4 heads × 16, at 2 bytes
    dropped = saved_per_token(MLA, []) - saved_per_token(MLA, ["mla_up_proj"])
    assert dropped == pytest.approx(2 * (4 * 24 + 4 * 24 + 4 * 16))


def test_mla_up_proj_repeats_the_up_projections():
    # queries straight from the hidden state (no query latent), keys and values from the 32-wide latent
    up = 2 * (64 * 4 * 24 + 32 * 4 * (16 + 16))
    assert repeated_flops(MLA, ["mla_up_proj"]) - repeated_flops(MLA, []) == pytest.approx(2 * up)


def test_layernorm_drops_only_norms_not_fused_into_a_linear():
    # MLA's input norm (read by its two down projections) stands alone: its 64-wide output at 2 bytes
    assert saved_per_token(MLA, []) - saved_per_token(MLA, ["layernorm"]) == pytest.approx(2 * 64)
    # a dense layer's norms are fused into q/k/v and fc1 (Transformer Engine): nothing to drop
    assert saved_per_token(DENSE, ["layernorm"]) == saved_per_token(DENSE, [])
    # the norm before an MoE layer stands alone (router and experts read it)
    assert saved_per_token(MOE, []) - saved_per_token(MOE, ["layernorm"]) == pytest.approx(2 * 64)


def test_moe_act_drops_the_experts_down_projection_input():
    # top 2 of experts 32 wide, 2 bytes each
    assert saved_per_token(MOE, []) - saved_per_token(MOE, ["moe_act"]) == pytest.approx(2 * 2 * 32)


def test_shared_experts_drop_their_gate_up_outputs_and_down_input():
    assert saved_per_token(MOE, []) - saved_per_token(MOE, ["shared_experts"]) == pytest.approx(2 * (2 + 1) * 32)


def test_moe_drops_the_permuted_tokens_and_every_expert_tensor():
    # per routed copy the 64-wide permuted token, gate and up outputs and the down input (32 wide);
    # the shared expert's three tensors
    routed = 2 * (64 + 3 * 32)
    assert saved_per_token(MOE, []) - saved_per_token(MOE, ["moe"]) == pytest.approx(2 * routed + 2 * 3 * 32)
    # and repeats the router, the top-2 experts and the shared expert: 2 FLOPs per multiply-add
    forward = 2 * 64 * (3 * 2 * 32 + 3 * 32 + 8)
    assert repeated_flops(MOE, ["moe"]) - repeated_flops(MOE, []) == pytest.approx(2 * forward)
    # with `moe` listed, `shared_experts` and `moe_act` add nothing more
    assert saved_per_token(MOE, ["moe", "shared_experts", "moe_act"]) == saved_per_token(MOE, ["moe"])


def test_mlp_acts_on_dense_layers_only():
    assert saved_per_token(MOE, ["mlp"]) == saved_per_token(MOE, [])
    # a dense gated MLP keeps gate and up outputs and the down input (128 wide) and, inside the
    # checkpoint, its fused norm's output (64): all dropped
    assert saved_per_token(DENSE, []) - saved_per_token(DENSE, ["mlp"]) == pytest.approx(2 * (3 * 128 + 64))
    assert repeated_flops(DENSE, ["mlp"]) - repeated_flops(DENSE, []) == pytest.approx(2 * 2 * 3 * 64 * 128)


def test_recomputing_costs_time_and_saves_memory():
    without = estimate(job(MOE, []), advise_fit=False)
    listed = estimate(job(MOE, ["moe", "layernorm"]), advise_fit=False)
    assert listed.memory_per_gpu_gib < without.memory_per_gpu_gib
    assert listed.step_time_s > without.step_time_s


def test_a_what_if_on_the_list_is_labelled_with_its_brackets():
    from rich.console import Console

    from trainrig.report.estimate_report import what_if_table

    base = estimate(job(MOE, []), advise_fit=False)
    label = "recompute_modules=[moe, layernorm]"
    console = Console(record=True, width=200)
    console.print(what_if_table(base, [(label, estimate(job(MOE, ["moe", "layernorm"]), advise_fit=False))]))
    assert label in console.export_text()  # rich would read "[moe, layernorm]" as markup and drop it
