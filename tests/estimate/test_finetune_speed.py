"""Speed of fine-tuning stacks: adapters' extra ops and bytes, eager small ops, dequantization."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.estimate.compute import adapter_bytes_per_token
from trainrig.estimate.host_issue import host_issue_s
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA = {"n_layers": 8, "hidden": 1024, "n_heads": 8, "n_kv_heads": 8, "ffn_hidden": 2816, "vocab": 32000}
ONE_GPU = {"gpu": "A100-SXM4-80GB", "n_gpus": 1, "gpus_per_node": 1}


def job(**training):
    return make_job(model=LLAMA, hardware=ONE_GPU, training={"seq_len": 512, "global_batch": 8, **training})


def test_adapter_bytes_follow_fan_in_and_fan_out():
    # LoRA on q only, no dropout: read the input again (2h), write B's output and add it (4·2·h)
    x = inputs_from_job(job(method="lora", lora_targets=["q"]), P)
    assert float(adapter_bytes_per_token(x)) == pytest.approx(2 * 1024 + 4 * 2 * 1024)
    assert float(adapter_bytes_per_token(inputs_from_job(job(), P))) == 0.0


def test_more_adapted_linears_take_longer():
    few = estimate(job(method="lora", lora_targets=["q", "v"]))
    many = estimate(job(method="lora", lora_targets="all-linear"))
    assert many.step_time_s > few.step_time_s


def test_eager_small_ops_cost_host_time_at_their_own_rate():
    fused = host_issue_s(inputs_from_job(job(fused_kernels=True), P), P)
    eager = host_issue_s(inputs_from_job(job(fused_kernels=False), P), P)
    # 7 fused elementwise kernels per layer become 7·factor eager ops: 7·(factor−1) extra, forward
    extra_forward = 8 * 7 * (P.eager_elementwise_factor - 1) * P.eager_op_host_us * 1e-6
    assert float(eager[0] - fused[0]) == pytest.approx(extra_forward, rel=1e-9)


def test_a_quantized_base_is_slower_than_a_16_bit_one():
    lora = estimate(job(method="lora"))
    qlora = estimate(job(method="qlora"))
    assert qlora.step_time_s > lora.step_time_s


def test_autogptq_torch_dequantization_moves_more_bytes_than_a_fused_nf4_kernel():
    from trainrig.estimate.job_fields import DEQUANT_BYTES_PER_WEIGHT

    nf4 = estimate(job(method="qlora", quantization="nf4"))
    gptq = estimate(job(method="qlora", quantization="gptq-int4"))
    assert DEQUANT_BYTES_PER_WEIGHT["gptq-int4"] > 6 * DEQUANT_BYTES_PER_WEIGHT["nf4"]
    assert gptq.step_time_s > nf4.step_time_s


def test_autogptq_keeps_the_dequantized_weights_for_backward_without_recompute():
    plain = estimate(job(method="qlora", quantization="gptq-int4"))
    recomputed = estimate(job(method="qlora", quantization="gptq-int4", recompute="full"))
    nf4 = estimate(job(method="qlora", quantization="nf4"))
    # 16-bit copies of every layer's linears are saved: more activation memory than NF4's run
    assert plain.memory_breakdown_gib["activations"] > nf4.memory_breakdown_gib["activations"]
    assert recomputed.memory_allocated_gib < plain.memory_allocated_gib


def _deepspeed_host_excess_s(n_gpus, **training):
    """Host issue time a DeepSpeed ZeRO-3 micro-batch adds over the same job without a framework:
    (forward, backward + recompute)."""
    gpus = {"gpu": "A100-SXM4-80GB", "n_gpus": n_gpus, "gpus_per_node": n_gpus}
    base = {"seq_len": 256, "global_batch": 8 * n_gpus, "zero": 3, "recompute": "full", **training}
    apart = {**LLAMA, "fused_qkv": False, "fused_gate_up": False}  # deepspeed's default layout, for both
    custom = make_job(model=apart, hardware=gpus, training=base)
    deepspeed = make_job(model=apart, hardware=gpus, training={**base, "framework": "deepspeed"})
    fwd_c, bwd_c = host_issue_s(inputs_from_job(custom, P), P)
    fwd_d, bwd_d = host_issue_s(inputs_from_job(deepspeed, P), P)
    return float(fwd_d - fwd_c), float(bwd_d - bwd_c), deepspeed.framework


def test_deepspeed_zero3_pays_its_per_module_fetch_on_the_host():
    # one rank: nothing is gathered, only the hooks' fetch and release per module and pass
    fwd, bwd, fw = _deepspeed_host_excess_s(1)
    modules = 8 * (2 + 4 + 3)  # two norms, q, k, v, o and the three MLP linears per layer
    fetch_s = modules * fw.zero3_module_fetch_us * 1e-6
    assert fwd == pytest.approx(fetch_s, rel=1e-9)
    assert bwd == pytest.approx(2 * fetch_s, rel=1e-9)  # recompute's forward + backward


def test_deepspeed_zero3_gathers_cost_host_ops_only_when_sharded():
    # two ranks: each gathered parameter (q, k, v, o and the MLP linears; the norms stay gathered
    # under the persistence threshold) costs zero3_gather_host_ops eager ops per gather, and a
    # micro-batch gathers twice: the forward, and the recomputed forward whose gather the backward reuses
    fwd, bwd, fw = _deepspeed_host_excess_s(2)
    fetch_s = 8 * (2 + 4 + 3) * fw.zero3_module_fetch_us * 1e-6
    gather_s = 8 * (4 + 3) * fw.zero3_gather_host_ops * P.eager_op_host_us * 1e-6
    assert fw.zero3_gather_host_ops > 0
    assert fwd == pytest.approx(fetch_s + gather_s, rel=1e-9)
    assert bwd == pytest.approx(2 * fetch_s + gather_s, rel=1e-9)  # one gather, not two: reused
    # without recompute the backward gathers again, once: the same two gathers a micro-batch
    fwd_n, bwd_n, _ = _deepspeed_host_excess_s(2, recompute="none")
    assert fwd_n == pytest.approx(fetch_s + gather_s, rel=1e-9)
    assert bwd_n == pytest.approx(fetch_s + gather_s, rel=1e-9)


def test_deepspeed_zero3_gather_host_cost_grows_with_the_gathered_parameters():
    # what sharding adds (two ranks against one, the same micro-batches): only the gathers' host ops,
    # one per gathered parameter and gather; LoRA's two matrices per adapted linear are gathered too
    def sharding_adds(**training):
        fwd2, bwd2, fw = _deepspeed_host_excess_s(2, **training)
        fwd1, bwd1, _ = _deepspeed_host_excess_s(1, **training)
        return fwd2 - fwd1, bwd2 - bwd1, fw.zero3_gather_host_ops * P.eager_op_host_us * 1e-6

    fwd, bwd, per_op = sharding_adds()
    assert fwd == pytest.approx(8 * 7 * per_op, rel=1e-9) and bwd == pytest.approx(8 * 7 * per_op, rel=1e-9)
    fwd, bwd, per_op = sharding_adds(method="lora", lora_targets=["q", "v"])
    assert fwd == pytest.approx(8 * (7 + 2 * 2) * per_op, rel=1e-9)
    assert bwd == pytest.approx(8 * (7 + 2 * 2) * per_op, rel=1e-9)


def _zero3_inputs(n_gpus, framework="deepspeed", **training):
    gpus = {"gpu": "A100-SXM4-80GB", "n_gpus": n_gpus, "gpus_per_node": n_gpus}
    base = {"seq_len": 256, "global_batch": 8 * n_gpus, "zero": 3, "recompute": "full", **training}
    if framework is not None:
        base["framework"] = framework
    return inputs_from_job(make_job(model=LLAMA, hardware=gpus, training=base), P, python_floats=True)


# LLAMA's parameters from its shape: per layer q, k, v, o (4·h²), gated MLP (3·h·ffn), two norms;
# untied embedding and head, the final norm
LLAMA_PARAMS = 8 * (4 * 1024**2 + 3 * 1024 * 2816 + 2 * 1024) + 2 * 32000 * 1024 + 1024


@pytest.mark.parametrize("n_gpus", [1, 2, 4])
def test_deepspeed_zero3_gradient_path_streams_its_counted_passes(n_gpus):
    from trainrig.estimate.core import _zero3_gradient_path_s

    x = _zero3_inputs(n_gpus)
    fw = make_job(model=LLAMA, hardware=ONE_GPU, training={"framework": "deepspeed"}).framework
    assert (fw.zero3_grad_full_passes, fw.zero3_grad_shard_passes) == (2, 3)
    m = 8  # global batch 8 per rank, micro-batch 1
    # the pre-divide reads and writes the whole 16-bit gradient; the accumulation reads the shard and the
    # reduced partition and writes the shard (a copy, one pass fewer, on the step's first micro-batch)
    passes = 2 + (3 - 1 / m) / n_gpus
    expected = LLAMA_PARAMS * 2 * passes / (float(x.hbm_bandwidth_gbs) * 1e9)
    assert float(_zero3_gradient_path_s(x)) == pytest.approx(expected, rel=1e-9)


def test_deepspeed_zero3_gradient_path_counts_only_what_trains_and_only_under_zero3():
    from trainrig.estimate.core import _zero3_gradient_path_s

    # LoRA on q and v, rank 16: A (16 × h) and B (h × 16) per adapted linear, 8 layers
    lora = _zero3_inputs(2, method="lora", lora_targets=["q", "v"], lora_rank=16)
    adapters = 8 * 2 * 2 * 16 * 1024
    expected = adapters * 2 * (2 + (3 - 1 / 8) / 2) / (float(lora.hbm_bandwidth_gbs) * 1e9)
    assert float(_zero3_gradient_path_s(lora)) == pytest.approx(expected, rel=1e-9)
    # no such path: ZeRO-2 under DeepSpeed, ZeRO-3 under a stack without the fact (FSDP-like)
    assert float(_zero3_gradient_path_s(_zero3_inputs(2, zero=2))) == 0.0
    assert float(_zero3_gradient_path_s(_zero3_inputs(2, framework=None))) == 0.0
    assert float(_zero3_gradient_path_s(_zero3_inputs(2, framework="hf-trainer"))) == 0.0
    # optimizer offloaded: the gradient partitions are in host memory, a path not counted here
    assert float(_zero3_gradient_path_s(_zero3_inputs(2, offload="optimizer"))) == 0.0


def test_deepspeed_zero3_step_streams_its_extra_bytes_per_local_parameter():
    from trainrig.estimate.host_side import optimizer_s

    for n_gpus in (1, 2):
        deepspeed, _ = optimizer_s(_zero3_inputs(n_gpus), P)
        plain, _ = optimizer_s(_zero3_inputs(n_gpus, framework=None), P)
        x = _zero3_inputs(n_gpus)
        extra = LLAMA_PARAMS / n_gpus * 44 / (float(x.hbm_bandwidth_gbs) * 1e9)
        assert float(deepspeed - plain) == pytest.approx(extra, rel=1e-9)
    deepspeed2, _ = optimizer_s(_zero3_inputs(2, zero=2), P)
    plain2, _ = optimizer_s(_zero3_inputs(2, zero=2, framework=None), P)
    assert float(deepspeed2) == pytest.approx(float(plain2), rel=1e-12)  # ZeRO-2's step: not counted


def test_deepspeed_zero3_gradient_path_is_gpu_time_of_every_micro_batch():
    from trainrig.estimate.core import _zero3_gradient_path_s, evaluate

    # the same job with the path's passes zeroed: the step's compute part differs by m × the path
    x = _zero3_inputs(2)
    without = x.with_values(zero3_grad_full_passes=0.0, zero3_grad_shard_passes=0.0)
    with_path = evaluate(x, P, with_memory=False).step_parts_s["compute"]
    no_path = evaluate(without, P, with_memory=False).step_parts_s["compute"]
    assert float(with_path - no_path) == pytest.approx(8 * float(_zero3_gradient_path_s(x)), rel=1e-9)
