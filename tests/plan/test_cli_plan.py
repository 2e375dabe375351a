"""`trainrig plan` and `trainrig compare` at the command line: JSON, exit codes, plots, one-sentence errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from trainrig import estimate, get_gpu, load_job

BASE = ["--model", "gpt3-350m", "--tokens", "1e10", "--seq-len", "2048", "--global-batch", "128",
        "--gpus", "h100,a100-80gb", "--max-gpus", "32"]


def run(*args: str, rc: int | None = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "160"}  # tables at a width where no cell is cut
    result = subprocess.run([sys.executable, "-m", "trainrig", *args], capture_output=True, text=True, timeout=300,
                            env=env)
    if rc is not None:
        assert result.returncode == rc, result.stdout + result.stderr
    return result


def test_plan_json_has_plans_counts_and_timing_and_each_job_re_estimates():
    data = json.loads(run("plan", *BASE, "--json", "--top", "2").stdout)
    assert data["feasible"] and len(data["plans"]) == 2
    assert data["n_configurations_evaluated"] >= data["n_configurations_fitting"] > 0
    assert data["search_time_s"] > 0
    top = data["plans"][0]
    price = top["offer"]["usd_per_gpu_hour"] if top["offer"] else None
    assert estimate(load_job(top["job"]), price_usd_per_gpu_hour=price).to_dict() == top["estimate"]


def test_plan_table_shows_plans_and_the_node():
    out = run("plan", *BASE, "--top", "2").stdout
    assert "Best configurations" in out and "How to run them" in out and "The node for plan #1" in out


def test_the_saved_job_runs_through_estimate(tmp_path):
    data = json.loads(run("plan", *BASE, "--json", "--top", "1").stdout)
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(data["plans"][0]["job"]))
    again = json.loads(run("estimate", str(job_file), "--json").stdout)
    assert again["step_time_s"] == data["plans"][0]["estimate"]["step_time_s"]


def test_nothing_meets_the_constraints_exits_1_with_the_closest_plans():
    result = run("plan", *BASE, "--deadline-days", "0.001", "--json", rc=1)
    data = json.loads(result.stdout)
    assert not data["feasible"] and data["plans"]
    assert data["message"].startswith("no configuration meets a ")


@pytest.mark.parametrize(("flags", "field"), [
    (["--deadline-days", "-3"], "deadline_days"),
    (["--objective", "fastest"], "objective"),
    (["--global-batch", "9-3"], "global_batch"),
    (["--gpus", "h1000"], "gpu_types"),
    (["--plot", "out.pdf"], "plot"),
])
def test_invalid_input_is_one_sentence_and_exit_2(flags, field):
    result = run("plan", *BASE, *flags, rc=2)
    assert "Traceback" not in result.stderr
    assert field in result.stderr and result.stderr.count("\n") <= 3


def test_missing_tokens_is_exit_2():
    result = run("plan", "--model", "gpt3-350m", rc=2)
    assert "tokens" in result.stderr and "Traceback" not in result.stderr


def test_offers_file_replaces_the_catalog_offers(tmp_path):
    offers = tmp_path / "offers.yaml"
    offers.write_text(textwrap.dedent("""
        offers:
        - {id: quote, name: quote, provider: me, instance: box, gpu: h100, gpus_per_node: 8, interconnect: nvlink4,
           usd_per_gpu_hour: 1.0, price_date: 2026-11-01, sources: ["our quote of 2026-11-01"]}
    """))
    data = json.loads(run("plan", *BASE, "--offers", str(offers), "--priced-only", "--json", "--top", "3").stdout)
    assert {p["offer"]["id"] for p in data["plans"]} == {"quote"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("offers: [{id: x}]\n")
    assert "offers" in run("plan", *BASE, "--offers", str(bad), rc=2).stderr


def test_job_file_supplies_model_and_training(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(textwrap.dedent("""
        model: gpt3-350m
        hardware: {gpu: h100, n_gpus: 8}
        training: {seq_len: 2048, global_batch: 128, tokens: 1.0e+10, tp: 4, optimizer: adam8bit}
    """))
    data = json.loads(run("plan", str(job), "--gpus", "h100", "--max-gpus", "16", "--json", "--top", "1").stdout)
    assert data["plans"][0]["job"]["training"]["optimizer"] == "adam8bit"
    assert any("planner chooses tp" in note for note in data["notes"])


@pytest.mark.parametrize("suffix", [".png", ".html"])
def test_plot_files_are_written(tmp_path, suffix):
    pytest.importorskip("matplotlib")
    path = tmp_path / f"plan{suffix}"
    run("plan", *BASE, "--top", "2", "--objective", "pareto", "--plot", str(path))
    content = path.read_bytes()
    if suffix == ".png":
        assert content.startswith(b"\x89PNG")
    else:
        text = content.decode()
        assert text.startswith("<!DOCTYPE html>") and "<svg" in text and "http" not in text.split("<svg")[0]


def test_compare_shows_each_gpu_side_by_side():
    out = run("compare", "--model", "gpt3-350m", "--tokens", "1e10", "--seq-len", "2048", "--global-batch", "128",
              "--gpus", "h100,a100,mi300x,4090", "--max-gpus", "16").stdout
    for name in ("h100", "a100", "mi300x", "4090"):
        assert get_gpu(name).id in out
    data = json.loads(run("compare", "--model", "gpt3-350m", "--tokens", "1e10", "--seq-len", "2048",
                          "--global-batch", "128", "--gpus", "h100,4090", "--max-gpus", "16", "--json").stdout)
    assert [row["gpu"] for row in data["rows"]] == ["H100-SXM5-80GB", "RTX-4090"]
    assert all(row["plan"]["estimate"]["fits"] for row in data["rows"])
