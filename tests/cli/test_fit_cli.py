"""`trainrig fit` end to end: the table, the JSON keys, the same answer as Python, one-sentence errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainrig.fit_answers import fit

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "llama3-8b-8xh100.yaml")
ANSWER_KEYS = {"setting", "value", "job_value", "memory_per_gpu_gib", "memory_capacity_gib", "global_batch",
               "grad_accum", "dp", "searched", "notes"}


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}  # wide enough that no cell text wraps
    return subprocess.run([sys.executable, "-m", "trainrig", "fit", *args], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture(scope="module")
def example_json() -> dict:
    result = run(EXAMPLE, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_json_has_every_answer_and_matches_the_python_function(example_json):
    data = example_json
    for key in ("model", "gpu", "n_gpus", "config", "fits", "memory_per_gpu_gib", "memory_capacity_gib",
                "micro_batch", "seq_len", "n_gpus_needed", "cheapest_gpu", "max_gpus", "notes"):
        assert key in data
    for key in ("micro_batch", "seq_len", "n_gpus_needed"):
        assert set(data[key]) >= ANSWER_KEYS
    cheapest = data["cheapest_gpu"]
    assert {"gpu", "ranked_by", "ranked", "unpriced", "fits_nowhere", "unsupported", "notes"} <= set(cheapest)
    assert cheapest["ranked_by"] == "cost_usd"  # the example gives training.tokens
    assert cheapest["gpu"] == cheapest["ranked"][0]["gpu"]
    for row in cheapest["ranked"]:
        assert row["memory_per_gpu_gib"] <= row["memory_capacity_gib"]
        assert row["usd_per_hour"] == pytest.approx(row["n_gpus"] * row["usd_per_gpu_hour"])
        assert row["cost_usd"] is not None
    expected = fit(EXAMPLE).to_dict()
    assert data["micro_batch"] == expected["micro_batch"] and data["n_gpus_needed"] == expected["n_gpus_needed"]
    assert data["cheapest_gpu"] == expected["cheapest_gpu"]


def test_table_answers_the_questions():
    result = run(EXAMPLE)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for text in ("largest micro-batch", "longest seq_len", "fewest H100-SXM5-80GB", "Cheapest GPU type",
                 "no catalog price"):
        assert text in out, text


def test_flags_build_the_job_as_estimate_does():
    result = run("--model", "llama3-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--seq-len", "4096",
                 "--global-batch", "64", "--max-gpus", "64", "--top", "2", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["gpu"] == "H100-SXM5-80GB" and data["config"]["seq_len"] == 4096
    assert len(data["cheapest_gpu"]["ranked"]) <= 2
    assert data["cheapest_gpu"]["ranked_by"] == "usd_per_hour"  # no tokens given


@pytest.mark.parametrize(("args", "field"), [
    (("--model", "llama3-8b", "--gpu", "h1000"), "hardware.gpu"),
    ((EXAMPLE, "--max-gpus", "0"), "--max-gpus"),
    ((EXAMPLE, "--set", "tp=3"), "training.tp"),
    (("--gpu", "h100"), "model"),
    (("no-such-job.yaml",), "job"),
])
def test_bad_input_is_one_sentence_and_exit_code_2(args, field):
    result = run(*args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}"), result.stderr
