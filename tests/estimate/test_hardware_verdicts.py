"""Honest hardware verdicts (issue 15): a kernel or feature the GPU cannot run is modelled as the
fallback that really runs, and the warning says so in the table as in JSON."""

from __future__ import annotations

from typer.testing import CliRunner

from jobs import make_job
from trainrig import estimate
from trainrig.cli.main import app


def _estimate(gpu: str, n_gpus: int = 8, **training):
    return estimate(make_job(hardware={"gpu": gpu, "n_gpus": n_gpus}, training={"precision": "fp16", **training}))


def test_volta_runs_the_memory_efficient_kernel_not_flashattention_2_and_says_so():
    asked = _estimate("V100-SXM2-32GB")
    assert any("cannot run FlashAttention-2" in w and "memory-efficient" in w for w in asked.warnings)
    as_run = _estimate("V100-SXM2-32GB", flash_attention_version=1)
    assert asked.step_time_s == as_run.step_time_s and asked.memory_per_gpu_gib == as_run.memory_per_gpu_gib
    assert not any("FlashAttention-2-class" in a for a in asked.assumptions)


def test_cdna1_has_no_fused_attention_so_the_scores_are_materialized():
    asked = _estimate("MI100")
    assert any("unfused attention" in w for w in asked.warnings)
    as_run = _estimate("MI100", flash_attention=False)
    assert asked.step_time_s == as_run.step_time_s and asked.memory_per_gpu_gib == as_run.memory_per_gpu_gib


def test_ampere_and_newer_keep_flashattention_2_without_a_warning():
    for gpu in ("A100-SXM4-80GB", "H100-SXM5-80GB", "MI300X"):
        assert not any("FlashAttention" in w for w in _estimate(gpu).warnings), gpu


def test_consumer_cards_without_peer_to_peer_are_named_in_the_table_and_in_json():
    assert any("peer-to-peer" in w for w in _estimate("RTX-4090").warnings)
    assert not any("peer-to-peer" in w for w in _estimate("RTX-4090", n_gpus=1, global_batch=8).warnings)
    assert not any("peer-to-peer" in w for w in _estimate("A100-SXM4-80GB").warnings)
    table = CliRunner().invoke(app, ["estimate", "--model", "llama3-8b", "--gpu", "rtx-4090", "--gpus", "8",
                                     "--zero", "3"])
    assert table.exit_code == 0 and "peer-to-peer" in table.output
