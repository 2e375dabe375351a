"""`trainrig probe` end to end, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainrig.specs import HardwareProfile


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    code = "from trainrig.cli.main import main; main()"
    env = {**os.environ, "COLUMNS": "250"}  # wide tables: no wrapped names
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_quick_json_on_this_machine_within_60_s(tmp_path: Path):
    profile, page = tmp_path / "profile.json", tmp_path / "report.html"
    start = time.perf_counter()
    done = run("probe", "--quick", "--json", "--save", str(profile), "--html", str(page),
               "--storage-path", str(tmp_path), timeout=90)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    assert elapsed <= 60, f"--quick took {elapsed:.1f} s"
    data = json.loads(done.stdout)
    assert data["quick"] is True and data["system"]["cpu"]["threads_logical"] >= 1
    assert data["system"]["memory"]["total_bytes"] > 0
    bench = data["benchmarks"]
    assert bench["cpu"]["tokenize_tokens_per_s_per_core"] > 0
    assert bench["cpu"]["collate_tokens_per_s_all_cores"] > 0
    assert bench["hostmem"]["copy_gbs_all_cores"] > 0
    assert bench["storage"]["read_gbs"] > 0 and bench["storage"]["write_gbs"] > 0
    if not data["gpu_found"]:
        assert data["gpus"] == [] and any("No GPU found" in n for n in data["notes"])
        assert data["nvml"]["reason"]
    saved = HardwareProfile.model_validate_json(profile.read_text())
    assert saved.storage_read_gbs == bench["storage"]["read_gbs"] and saved.quick is True
    assert page.read_text().startswith("<!doctype html>")
    assert "profile written" in done.stderr


def test_tables_with_a_replayed_gpu(tmp_path: Path):
    done = run("probe", "--quick", "--only", "storage", "--nvml-fake", "a100_sxm_throttling",
               "--storage-path", str(tmp_path), "--time-limit", "30")
    assert done.returncode == 0, done.stderr
    assert "NVIDIA A100-SXM4-80GB" in done.stdout and "Health" in done.stdout
    assert "power capped at 300 of 400 W" in done.stdout and "FAIL" in done.stdout


def test_record_nvml_replays_a_recording(tmp_path: Path):
    path = tmp_path / "rec.json"
    done = run("probe", "--record-nvml", str(path), "--nvml-fake", "h100_sxm_healthy")
    assert done.returncode == 0, done.stderr
    recording = json.loads(path.read_text())
    assert recording["devices"][0]["nvmlDeviceGetName"] == "NVIDIA H100 80GB HBM3"
    again = run("probe", "--quick", "--only", "storage", "--json", "--nvml-fake", str(path),
                "--storage-path", str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["gpus"][1]["nvlink_active_links"] == 18


@pytest.mark.parametrize(("args", "message"), [
    (["--only", "gemm,bogus"], "unknown benchmark 'bogus'"),
    (["--time-limit", "-3"], "--time-limit"),
    (["--storage-path", "/no/such/dir"], "is not an existing directory"),
    (["--nvml-fake", "nope"], "no recording 'nope'"),
    (["--nnodes", "2"], "--rdzv-endpoint"),
    (["--save", "/no/such/dir/p.json"], "does not exist"),
])
def test_bad_input_is_one_sentence_and_exit_2(args, message):
    done = run("probe", *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2
