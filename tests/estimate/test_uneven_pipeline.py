"""Uneven pipeline splits (issue 12 item 1): any pp·vpp up to the layer count, paced by the fullest stage;
Megatron-Core's embedding/loss pipeline slots."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from jobs import make_job
from trainrig import estimate
from trainrig.cli.common import run_guarded
from trainrig.cli.main import app
from trainrig.errors import TrainrigError
from trainrig.estimate.core import evaluate
from trainrig.estimate.inputs import inputs_from_job, stack_inputs
from trainrig.estimate.params import DEFAULT_PARAMETERS as P

# BLOOM-176B (BigScience 2022, arXiv:2211.05100 Table 1/§3.4): 70 layers, hidden 14336, 112 heads,
# vocab 250880, ALiBi, LayerNorm, 4h GeLU MLP; trained on 48 nodes of 8 A100 with tp 4 × pp 12 × dp 8.
BLOOM = {"n_layers": 70, "hidden": 14336, "n_heads": 112, "ffn_hidden": 4 * 14336, "vocab": 250880,
         "gated_mlp": False, "norm": "layernorm", "bias": "all", "position_embedding": "alibi",
         "tied_embeddings": True}
NODES = {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8, "inter_node": "ib-ndr"}


def bloom_job(n_layers=70, pp=12, **training):
    return make_job(model={**BLOOM, "n_layers": n_layers}, hardware={**NODES, "n_gpus": 4 * pp},
                    training={"tp": 4, "pp": pp, "global_batch": 48, "seq_len": 2048, "zero": 1,
                              "recompute": "full", **training})


def llama405_job(pp=16, vpp=1, slots=False):
    # Llama 3 paper §3.3.2: tp 8, pp 16 on 126 layers; Megatron-Bridge's recipe: pp 8 × vpp 8 with
    # account_for_embedding/loss_in_pipeline_split
    return make_job(model="llama3.1-405b", hardware={**NODES, "n_gpus": 8 * pp},
                    training={"tp": 8, "pp": pp, "vpp": vpp, "seq_len": 8192, "global_batch": 64,
                              "zero": 1, "recompute": "full", "sequence_parallel": True,
                              "account_for_embedding_in_pipeline_split": slots,
                              "account_for_loss_in_pipeline_split": slots})


def test_bloom_176b_on_12_stages_loads_and_estimates():
    job = bloom_job()
    x = inputs_from_job(job, P)
    assert float(x.layers_per_stage) == 6.0  # ceil(70 / 12)
    e = estimate(job)
    assert e.step_time_s > 0 and np.isfinite(e.step_time_s) and 0 < e.mfu < 1
    assert any("70 layers on pp 12 split unevenly: the fullest stages hold 6 layers" in n for n in e.notes)


def test_llama_405b_on_16_stages_is_paced_by_8_layer_stages():
    job = llama405_job(pp=16)
    assert float(inputs_from_job(job, P).layers_per_stage) == 8.0  # ceil(126 / 16)
    e = estimate(job)
    assert np.isfinite(e.step_time_s) and np.isfinite(e.memory_per_gpu_gib)


def test_megatron_bridge_405b_recipe_counts_embedding_and_loss_as_slots():
    slotted = llama405_job(pp=8, vpp=8, slots=True)
    x = inputs_from_job(slotted, P)
    # (126 + 2) / 64 = 2 slots per chunk, 8 chunks per stage: 16 layers in the middle stages
    assert float(x.layers_per_stage) == 16.0 and float(x.end_stage_layers) == 15.0
    e = estimate(slotted)
    assert any("126 layers + 2 embedding/loss slots on pp 8 × vpp 8 split evenly" in n for n in e.notes)
    # without the slots, ceil(126 / 64) = 2 per chunk too, but the head then sits beside 16 layers
    plain = estimate(llama405_job(pp=8, vpp=8, slots=False))
    assert e.step_time_s < plain.step_time_s
    assert e.memory_per_gpu_gib < plain.memory_per_gpu_gib


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
def test_megatron_counts_the_ends_where_only_they_make_the_split_even(framework):
    """Megatron-Core runs 126 layers on pp 8 × vpp 8 only with the ends as slots (or sized end stages):
    a Megatron-family job that sets neither gets the slots, named in the assumptions; other stacks,
    a split the layers make even alone, and a job that sizes its stages keep what they said."""
    def job(**training):
        return make_job(model="llama3.1-405b", hardware={**NODES, "n_gpus": 8 * 8},
                        training={"tp": 8, "pp": 8, "seq_len": 8192, "global_batch": 64, "zero": 1,
                                  "recompute": "full", "sequence_parallel": True, "framework": framework,
                                  **training})

    inferred = job(vpp=8)
    t = inferred.training
    assert t.account_for_embedding_in_pipeline_split and t.account_for_loss_in_pipeline_split
    assert "account_for_loss_in_pipeline_split" not in t.model_fields_set
    assert float(inputs_from_job(inferred, P).end_stage_layers) == 15.0
    said = estimate(inferred).assumptions
    assert any("126 + 2 = 128 over pp·vpp 64" in line for line in said)
    assert not job(vpp=8, account_for_loss_in_pipeline_split=False).training.account_for_embedding_in_pipeline_split
    assert not job(vpp=7).training.account_for_loss_in_pipeline_split  # 126 = 8 × 7 × 2.25: 128 does not divide either
    assert not job(vpp=1, pipeline_layers=[16] * 7 + [14]).training.account_for_loss_in_pipeline_split
    custom = make_job(model="llama3.1-405b", hardware={**NODES, "n_gpus": 64},
                      training={"tp": 8, "pp": 8, "vpp": 8, "seq_len": 8192, "global_batch": 64})
    assert not custom.training.account_for_loss_in_pipeline_split


def test_megatron_bridges_405b_on_128_chunks_is_accepted_with_its_end_slots():
    """Megatron-Bridge's archive runs Llama 3.1 405B on pp 16 × vpp 8 (GB200, MXFP8 and NVFP4): 128
    chunks for 126 layers, one slot each with the embedding and loss counted; a stack without the
    end slots is refused in one sentence."""
    training = {"tp": 4, "pp": 16, "vpp": 8, "seq_len": 8192, "global_batch": 64, "zero": 1,
                "sequence_parallel": True}
    job = make_job(model="llama3.1-405b", hardware={**NODES, "n_gpus": 64}, training={**training, "framework": "nemo"})
    assert job.training.account_for_loss_in_pipeline_split
    assert np.isfinite(estimate(job).step_time_s)
    with pytest.raises(TrainrigError) as error:
        make_job(model="llama3.1-405b", hardware={**NODES, "n_gpus": 64}, training=training)
    assert error.value.field == "training.vpp"


def test_the_property_is_n_over_pp_exactly_when_pp_vpp_divides_n():
    x = inputs_from_job(make_job(), P)
    n = np.array([24, 80, 80, 126, 126, 96, 61])
    pp = np.array([4, 8, 4, 2, 63, 4, 61])
    vpp = np.array([2, 5, 4, 1, 2, 3, 1])
    rows = x.with_values(n_layers=n.astype(float), pp=pp.astype(float), vpp=vpp.astype(float))
    assert np.all((n % (pp * vpp)) == 0)
    assert np.array_equal(rows.layers_per_stage, n / pp)
    uneven = x.with_values(n_layers=70.0, pp=np.arange(1.0, 71.0), vpp=1.0)
    assert np.array_equal(uneven.layers_per_stage, [math.ceil(70 / p) for p in range(1, 71)])


def test_the_fullest_stage_sets_step_and_memory():
    """61…72 layers on 12 stages all put 6 layers on the fullest stage: the same step and memory per
    GPU as the even 72 / 12; 60 layers (5 per stage) is strictly less."""
    even = estimate(bloom_job(72))
    for n in (61, 66, 70):
        uneven = estimate(bloom_job(n))
        assert uneven.step_time_s == pytest.approx(even.step_time_s, rel=1e-12)
        assert uneven.memory_per_gpu_gib == pytest.approx(even.memory_per_gpu_gib, rel=1e-12)
        assert uneven.mfu < even.mfu  # fewer model FLOPs in the same time
    fewer = estimate(bloom_job(60))
    assert fewer.step_time_s < even.step_time_s and fewer.memory_per_gpu_gib < even.memory_per_gpu_gib


def test_layouts_are_evaluated_as_one_vectorized_batch():
    jobs = [bloom_job(70, pp) for pp in (2, 8, 12)] + [bloom_job(72, 12)]
    rows = [inputs_from_job(j, P) for j in jobs]
    batch = evaluate(stack_inputs(rows), P)
    for i, row in enumerate(rows):
        one = evaluate(row, P)
        assert batch.step_time_s[i] == pytest.approx(float(one.step_time_s), rel=1e-12)
        assert batch.memory_bytes[i] == pytest.approx(float(one.memory_bytes), rel=1e-12)


SLOTS = {"account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}


def test_slots_never_slow_the_step_and_the_head_replaces_a_layer():
    for pp in (4, 12):  # 72 slots: 18 or 6 per stage, the same fullest stage as ceil(70 / pp)
        with_slots = estimate(bloom_job(70, pp, **SLOTS))
        without = estimate(bloom_job(70, pp))
        # BLOOM's 250880-word head outweighs a layer: the last stage (L − 1 layers + head) paces
        assert with_slots.step_time_s < without.step_time_s
        assert with_slots.memory_per_gpu_gib < without.memory_per_gpu_gib


def test_two_stages_with_both_slots_hold_one_layer_fewer_each():
    x = inputs_from_job(bloom_job(70, 2, **SLOTS), P)
    assert float(x.stage_slots) == 36.0 and float(x.layers_per_stage) == 35.0 and float(x.end_stage_layers) == 35.0


def test_slots_follow_megatron_cores_divisibility_rule():
    with pytest.raises(TrainrigError) as info:
        bloom_job(70, 12, account_for_loss_in_pipeline_split=True)  # 71 slots on 12 stages
    assert info.value.field == "training.account_for_loss_in_pipeline_split" and "71 layer-slots" in str(info.value)


def test_pp_larger_than_the_layer_count_is_one_sentence():
    with pytest.raises(TrainrigError) as info:
        bloom_job(n_layers=8, pp=12)
    assert info.value.field == "training.pp" and "exceeds the model's 8 layers" in str(info.value)
    with pytest.raises(TrainrigError) as info:
        bloom_job(n_layers=24, pp=4, vpp=8)
    assert info.value.field == "training.vpp"


def test_a_slot_without_pipeline_parallelism_is_refused():
    with pytest.raises(TrainrigError) as info:
        bloom_job(pp=1, account_for_embedding_in_pipeline_split=True)
    assert info.value.field == "training.account_for_embedding_in_pipeline_split"


def test_the_cli_exits_2_with_one_line_for_too_many_stages(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({
        "model": {**BLOOM, "n_layers": 8}, "hardware": {**NODES, "n_gpus": 48},
        "training": {"tp": 4, "pp": 12, "global_batch": 48}}))
    with CliRunner().isolation() as streams:
        code = run_guarded(app, ["estimate", str(path)])
        err = streams[1].getvalue().decode()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "training.pp" in lines[0], err


def test_a_chunk_may_hold_only_an_end_where_the_ends_take_slots():
    # Megatron-MoE-ModelZoo runs Qwen3-235B's 94 layers on pp 32 × vpp 3 with both ends as slots:
    # 96 slots, one per chunk, so the first and last chunks hold the embedding and the loss alone
    x = inputs_from_job(bloom_job(n_layers=22, pp=8, vpp=3, **SLOTS), P)
    assert float(x.stage_slots) == 3.0 and float(x.layers_per_stage) == 3.0 and float(x.end_stage_layers) == 2.0
    with pytest.raises(TrainrigError) as info:
        bloom_job(n_layers=21, pp=8, vpp=3, **SLOTS)  # 23 slots for 24 chunks
    assert info.value.field == "training.vpp" and "21 layers and 2 end slots" in str(info.value)
