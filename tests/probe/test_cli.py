"""`trainrig probe` end to end, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainrig.specs import HardwareProfile


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    code = "from trainrig.cli.main import main; main()"
    env = {**os.environ, "COLUMNS": "250"}  # wide tables: no wrapped names
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_quick_json_on_this_machine(tmp_path: Path):
    """`--quick` runs every section under its 50 s budget for the benchmarks (docs/probe.md); how long
    it takes on a loaded machine is not asserted (speed is a benchmark, not a test: issue 16), the
    timeout only guards against a hang."""
    profile, page = tmp_path / "profile.json", tmp_path / "report.html"
    done = run("probe", "--quick", "--json", "--save", str(profile), "--html", str(page),
               "--storage-path", str(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["quick"] is True and data["time_limit_s"] == 50
    assert {section["status"] for section in data["sections"]} <= {"ran", "skipped", "partial"}
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
    # issue 13, items 9, 10: checked before the probe runs, so nothing measured is lost
    (["--save", str(Path(__file__).parent)], "is a directory"),
    (["--html", str(Path(__file__).parent)], "is a directory"),
    (["--save", "/proc/trainrig-profile.json"], "cannot write"),
    (["--html", "/proc/trainrig-probe.html"], "cannot write"),
    (["--time-limit", "nan"], "--time-limit"),
    (["--time-limit", "inf"], "--time-limit"),
])
def test_bad_input_is_one_sentence_and_exit_2(args, message):
    done = run("probe", *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # refused before any measurement
    assert len(done.stderr.strip().splitlines()) <= 2


_BLOCKED_STORAGE_PROBE = """
import sys, time
from trainrig.probe import storage_bench

def write_then_hang(paths, per_file, timer):
    paths[0].write_bytes(b"x" * 4096)  # a shard file exists now
    print("ready", flush=True)
    time.sleep(120)

storage_bench._write_files = write_then_hang
sys.argv = ["trainrig", "probe", "--only", "storage", "--storage-path", sys.argv[1], "--json"]
from trainrig.cli.main import main
main()
"""


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signalled_probe_removes_its_shard_files(tmp_path: Path, signame: str):
    import signal

    process = subprocess.Popen([sys.executable, "-c", _BLOCKED_STORAGE_PROBE, str(tmp_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        assert list(tmp_path.glob(".trainrig-probe-*"))
        process.send_signal(getattr(signal, signame))
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert list(tmp_path.glob(".trainrig-probe-*")) == [], stderr
    if signame != "SIGINT":
        assert process.returncode == 128 + getattr(signal, signame)
        assert "Traceback" not in stderr
