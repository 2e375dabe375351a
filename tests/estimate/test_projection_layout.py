"""The layer's linear layout (`model.fused_qkv`, `model.fused_gate_up`, the frameworks' model code)
and the host cost of PEFT's adapters (`lora_adapter_host_ops`): counted from first principles."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.errors import TrainrigError
from trainrig.estimate.compute import linear_time_s
from trainrig.estimate.core import _gemm_times_s
from trainrig.estimate.host_issue import _kernels_per_layer, host_issue_s
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA = {"n_layers": 8, "hidden": 1024, "n_heads": 8, "n_kv_heads": 2, "ffn_hidden": 2816, "vocab": 32000}
ONE_GPU = {"gpu": "A100-SXM4-80GB", "n_gpus": 1, "gpus_per_node": 1}


def job(model=None, **training):
    return make_job(model={**LLAMA, **(model or {})}, hardware=ONE_GPU,
                    training={"seq_len": 512, "global_batch": 8, **training})


def inputs(model=None, **training):
    return inputs_from_job(job(model, **training), P)


APART = {"fused_qkv": False, "fused_gate_up": False}
FUSED = {"fused_qkv": True, "fused_gate_up": True}


def test_separate_linears_launch_their_own_gemms_forward_and_backward():
    fused_fwd, fused_bwd = _kernels_per_layer(inputs(FUSED), P)
    apart_fwd, apart_bwd = _kernels_per_layer(inputs(APART), P)
    # q, k, v: 3 linears for 1; gate, up: 2 for 1 → 3 more forward GEMMs, each with an input- and a
    # weight-gradient GEMM in the backward
    assert float(apart_fwd - fused_fwd) == 3
    assert float(apart_bwd - fused_bwd) == 3 + 3


def test_a_frozen_base_launches_no_weight_gradient_gemms():
    fwd, bwd = _kernels_per_layer(inputs(APART, method="lora"), P)
    full_fwd, full_bwd = _kernels_per_layer(inputs(APART), P)
    assert float(fwd) == float(full_fwd)
    assert float(full_bwd - bwd) == 7  # one weight gradient per linear: q, k, v, o, gate, up, down


def test_separate_projections_are_timed_as_their_own_gemms():
    x = inputs(APART)
    tokens = 512
    q_fwd, q_bwd = linear_time_s(tokens, 1024, 1024, x, P)
    kv_fwd, kv_bwd = linear_time_s(tokens, 1024, 256, x, P)  # 2 kv heads × 128
    o_fwd, o_bwd = linear_time_s(tokens, 1024, 1024, x, P)
    forward, backward, _ = _gemm_times_s(x, P)["attention"]
    assert float(forward) == pytest.approx(float(q_fwd + 2 * kv_fwd + o_fwd), rel=1e-12)
    assert float(backward) == pytest.approx(float(q_bwd + 2 * kv_bwd + o_bwd), rel=1e-12)
    up_fwd, _ = linear_time_s(tokens, 1024, 2816, x, P)
    down_fwd, _ = linear_time_s(tokens, 2816, 1024, x, P)
    assert float(_gemm_times_s(x, P)["dense_mlp"][0]) == pytest.approx(float(2 * up_fwd + down_fwd), rel=1e-12)


def test_the_layout_changes_no_flop_and_no_parameter():
    fused, apart = estimate(job(FUSED)), estimate(job(APART))
    flops = [e.model_tflops_per_gpu * e.step_time_s for e in (fused, apart)]
    assert flops[0] == pytest.approx(flops[1])
    assert fused.memory_breakdown_gib["weights"] == apart.memory_breakdown_gib["weights"]


def test_without_a_framework_the_layout_is_fused_as_before():
    unset, fused = estimate(job()), estimate(job(FUSED))
    assert unset.step_time_s == fused.step_time_s
    assert unset.memory_allocated_gib == fused.memory_allocated_gib
    assert any("q, k and v in one linear" in said for said in unset.assumptions)
    assert not any("model.fused_qkv" in said for said in fused.assumptions)


@pytest.mark.parametrize(("framework", "qkv", "gate_up"), [
    ("megatron", 1.0, 1.0), ("hf-trainer", 0.0, 0.0), ("torchtune", 0.0, 0.0), ("torchtitan", 0.0, 0.0),
    ("litgpt", 1.0, 0.0), ("deepspeed", 0.0, 0.0), ("custom", 1.0, 1.0),
])
def test_each_framework_runs_its_own_model_code(framework, qkv, gate_up):
    x = inputs(framework=framework)
    assert (float(x.fused_qkv), float(x.fused_gate_up)) == (qkv, gate_up)


def test_the_model_code_the_job_names_overrides_the_frameworks():
    # Qwen-1 under HF Trainer: c_attn fuses q, k, v; w1 and w2 stay apart (5 linears)
    x = inputs({"fused_qkv": True}, framework="hf-trainer")
    assert float(x.linears_per_layer) == 5
    said = estimate(job({"fused_qkv": True}, framework="hf-trainer")).assumptions
    assert any("gate and up in 2 (Hugging Face Trainer" in s for s in said)


def test_an_adapter_on_a_fused_linear_is_one_adapter():
    targets = ["q", "k", "v"]
    fused = inputs({"fused_qkv": True}, method="lora", lora_targets=targets)
    apart = inputs({"fused_qkv": False}, method="lora", lora_targets=targets)
    assert (float(fused.adapted_linears), float(apart.adapted_linears)) == (1, 3)
    # LoRA parameters stay per part: LitGPT's LoRAQKVLinear concatenates one A per enabled part
    states = [estimate(job({"fused_qkv": f}, method="lora", lora_targets=targets)).memory_breakdown_gib["optimizer"]
              for f in (True, False)]
    assert states[0] == states[1]


def test_peft_adapters_cost_their_measured_host_time():
    lora = job(APART, method="lora", lora_targets=["q", "v"], framework="hf-trainer", recompute="none")
    counted = lora.model_copy(update={"framework": lora.framework.model_copy(update={"lora_adapter_host_ops": None})})
    fwd_m, bwd_m = host_issue_s(inputs_from_job(lora, P), P)
    fwd_c, bwd_c = host_issue_s(inputs_from_job(counted, P), P)
    measured_fwd, measured_bwd = lora.framework.lora_adapter_host_ops
    adapters, op_s = 8 * 2, P.eager_op_host_us * 1e-6  # 8 layers × (q, v)
    # counted: A, B, the scaled add and dropout one op each, twice in the backward
    assert float(fwd_m - fwd_c) == pytest.approx(adapters * (measured_fwd - 4) * op_s, rel=1e-9)
    assert float(bwd_m - bwd_c) == pytest.approx(adapters * (measured_bwd - 8) * op_s, rel=1e-9)


def test_a_layout_that_is_not_a_boolean_is_refused_naming_the_field():
    with pytest.raises(TrainrigError) as info:
        job({"fused_qkv": "maybe"})
    assert info.value.field == "model.fused_qkv"


def test_a_negative_adapter_host_time_is_refused():
    from pydantic import ValidationError

    from trainrig.specs.framework import FrameworkSpec

    with pytest.raises(ValidationError, match="lora_adapter_host_ops"):
        FrameworkSpec(id="x", name="x", sources=("s",), lora_adapter_host_ops=(-1.0, 8.0))
