"""Throughput terms of issue 12: document-masked packing, DeepSpeed's gradient buckets, and the
micro-batch the Qwen multinode row ran (docs/accuracy.md, "Throughput accuracy, issue 12")."""

from __future__ import annotations

import pytest

from jobs import make_job
from trainrig import estimate
from trainrig.catalog.cases import BUNDLED_CASES_DIR, load_cases
from trainrig.errors import TrainrigError
from trainrig.estimate import collectives as comm
from trainrig.estimate.compute import (
    ATTENTION_KEY_TILE,
    attention_key_ramp,
    attention_time_s,
    fused_attention_keys,
)
from trainrig.estimate.inputs import inputs_from_job
from trainrig.estimate.memory import trainable_parameter_counts
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

LLAMA_3B = {"n_layers": 28, "hidden": 3072, "n_heads": 24, "n_kv_heads": 8, "ffn_hidden": 8192,
            "vocab": 128256, "tied_embeddings": True}
ONE_A100 = {"gpu": "A100-SXM4-80GB", "n_gpus": 1, "gpus_per_node": 1}


def packed(**training):
    return make_job(model=LLAMA_3B, hardware=ONE_A100,
                    training={"seq_len": 4096, "micro_batch": 2, "global_batch": 2, **training})


# ---- document-masked packing -------------------------------------------------------------------


def test_a_query_of_a_packed_sample_computes_its_own_keys_and_one_tile():
    # causal over 4096 tokens: (4096 + 1)/2 keys per query; samples of 135 tokens: (135 + 1)/2 of
    # their own plus the one key tile (128) a sample boundary leaves partly masked
    causal = inputs_from_job(packed(), P)
    masked = inputs_from_job(packed(packed_sample_len=135), P)
    assert float(fused_attention_keys(causal)) == pytest.approx(2048.5)
    assert ATTENTION_KEY_TILE == 128
    assert float(fused_attention_keys(masked)) == pytest.approx(68 + 128)


def test_document_masking_shrinks_the_attention_core_by_the_keys_it_skips():
    causal = inputs_from_job(packed(), P)
    masked = inputs_from_job(packed(packed_sample_len=135), P)
    tokens = 2 * 4096
    fwd_c, bwd_c = attention_time_s(tokens, 24, causal, P)
    fwd_m, bwd_m = attention_time_s(tokens, 24, masked, P)
    # FLOPs fall by 2048.5 / 196; where the model has a per-block fixed cost (attention_key_ramp),
    # fewer key blocks per query block also carry it at a lower rate
    ramp = (float(attention_key_ramp(causal, P) / attention_key_ramp(masked, P))
            if P.attention_key_overhead > 0 else 1.0)
    assert float(fwd_c / fwd_m) == pytest.approx(2048.5 / 196 / ramp)
    assert float(bwd_c / bwd_m) == pytest.approx(float(fwd_c / fwd_m))


def test_a_sample_as_long_as_the_pack_is_plain_causal_attention():
    plain = estimate(packed())
    whole = estimate(packed(packed_sample_len=4096))
    assert whole.step_time_s == pytest.approx(plain.step_time_s, rel=1e-12)
    assert estimate(packed(packed_sample_len=135)).step_time_s < plain.step_time_s


def test_unfused_attention_computes_every_score_whatever_the_mask():
    # eager attention with a dense document mask still multiplies the full s × s scores
    eager = estimate(packed(attention_kernel="eager"))
    eager_masked = estimate(packed(attention_kernel="eager", packed_sample_len=135))
    assert eager_masked.step_time_s == pytest.approx(eager.step_time_s, rel=1e-12)


@pytest.mark.parametrize("training, words", [
    ({"packing": False, "packed_sample_len": 135}, "mean_seq_len"),
    ({"packed_sample_len": 8192}, "exceeds seq_len 4096"),
])
def test_packed_sample_len_errors_name_the_field(training, words):
    with pytest.raises(TrainrigError) as error:
        packed(**training)
    assert "training.packed_sample_len" in str(error.value) and words in str(error.value)


def test_packing_stated_without_a_sample_length_is_an_assumption():
    said = estimate(packed(packing=True)).assumptions
    assert any("packed_sample_len" in line for line in said)
    assert not any("packed_sample_len" in line for line in estimate(packed(packed_sample_len=135)).assumptions)


# ---- DeepSpeed's gradient buckets ----------------------------------------------------------------

QWEN_7B = {"n_layers": 32, "hidden": 4096, "n_heads": 32, "ffn_hidden": 11008, "vocab": 151936,
           "tied_embeddings": False, "bias": "qkv"}
TWO_NODES = {"gpu": "A100-SXM4-80GB", "n_gpus": 4, "gpus_per_node": 2}


def lora_zero2(framework):
    return make_job(model=QWEN_7B, hardware=TWO_NODES, training={
        "seq_len": 256, "micro_batch": 2, "global_batch": 64, "method": "lora", "lora_rank": 64,
        "lora_targets": ["q", "k", "v", "o", "gate", "up", "down"], "zero": 2, "recompute": "full",
        "framework": framework})


def test_deepspeed_reduces_a_lora_gradient_set_in_one_bucket_after_the_backward():
    # 143 M adapter gradients < DeepSpeed's reduce_bucket_size of 5e8 elements: the only bucket is
    # still filling when the backward ends, so its reduce-scatter runs after it, every micro-batch
    job = lora_zero2("deepspeed")
    x = inputs_from_job(job, P)
    est = estimate(job)
    dense, experts = trainable_parameter_counts(x)
    assert 1.3e8 < float(dense + experts) < 5e8
    group = comm.GroupLinks(x.dp * x.cp, x.tp, x, P)
    whole_set = float(comm.reduce_scatter_time_s(float(dense + experts) * x.grad_bytes, group))
    # + once per step, ZeRO-2's all-gather of the updated 16-bit adapters
    gather = float(comm.all_gather_time_s(float(dense + experts) * x.weight_bytes, group))
    micro_batches = 8
    assert est.step_breakdown_s["dp_comm"] == pytest.approx(micro_batches * whole_set + gather, rel=1e-6)


def test_ddp_buckets_of_25_mib_leave_only_the_last_one_exposed():
    deepspeed = estimate(lora_zero2("deepspeed")).step_breakdown_s["dp_comm"]
    ddp_like = estimate(lora_zero2("custom")).step_breakdown_s["dp_comm"]
    assert deepspeed > 5 * ddp_like


# ---- the Qwen multinode row's micro-batch ---------------------------------------------------------


def _with_micro_batch(job, micro_batch):
    data = job.model_dump()
    data["training"]["global_batch"] = data["training"]["global_batch"] // data["training"]["micro_batch"] * micro_batch
    data["training"]["micro_batch"] = micro_batch
    return type(job).model_validate(data)


def test_the_qwen_multinode_rows_memory_grows_as_two_sequences_per_micro_batch_hold():
    # README, 7B LoRA (multinode), summed over 4 GPUs: 74.7 G at 256 tokens, 155.5 G at 8192
    measured_growth_gb = (155.5 - 74.7) / 4
    cases = {c.id: c for c in load_cases([BUNDLED_CASES_DIR / "qwen.yaml"])}
    short, long = cases["qwen1_7b_lora_multinode_s256"], cases["qwen1_7b_lora_multinode_s8192"]
    assert short.job.training.micro_batch == long.job.training.micro_batch == 2

    def growth_gb(micro_batch):
        gib = [estimate(_with_micro_batch(c.job, micro_batch), advise_fit=False).memory_allocated_gib
               for c in (short, long)]
        return (gib[1] - gib[0]) * 2**30 / 1e9

    assert growth_gb(2) == pytest.approx(measured_growth_gb, rel=0.15)
    assert growth_gb(1) < 0.6 * measured_growth_gb
