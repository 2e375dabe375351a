"""benchmarks/bench_set.py, the job set scripts/gpu_check.sh benches on a GPU, smoke-run on the CPU
with 64-wide models: it runs, prints its table and saves runs that `trainrig validate` reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainrig.catalog.cases import load_cases

pytest.importorskip("torch")
SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_set.py"


def test_the_bench_set_runs_tiny_on_the_cpu_and_saves_runs_validate_reads(tmp_path):
    jobs = ["llama3-8b-lora", "gpt3-1.3b", "mixtral-8x7b"]  # in the set's order
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--device", "cpu", "--steps", "1", "--warmup", "0",
                           "--only", ",".join(jobs), "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "bench_set.json").read_text())
    assert [row["job"] for row in rows] == jobs
    assert all(row["step_time_s"]["measured"] > 0 and row["step_time_s"]["estimated"] > 0 for row in rows)
    assert len(load_cases([tmp_path / "runs"])) == len(jobs)
    assert all(job in done.stdout for job in jobs)
