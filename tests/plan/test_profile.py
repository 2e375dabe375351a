"""A probe profile changes the plan for the GPU type it measured, and only that one."""

from __future__ import annotations

from trainrig.plan import compare
from trainrig.specs import HardwareProfile


def _best_step(result, gpu_id: str) -> float:
    row = next(c for c in result.to_dict()["rows"] if c["gpu"] == gpu_id)
    return row["plan"]["estimate"]["step_time_s"]


def test_a_slow_measured_gpu_plans_slower_and_others_do_not_change():
    arguments = {"model": "llama3-8b", "tokens": 1e11, "gpu_types": ["h100", "a100"], "seq_len": 4096,
                 "global_batch": 256, "max_gpus": 16}
    datasheet = compare(**arguments)
    slow = HardwareProfile(gpu_catalog_id="H100-SXM5-80GB", gemm_tflops={"bf16": 300.0}, memory_bandwidth_gbs=2000)
    measured = compare(**arguments, profile=slow)
    assert _best_step(measured, "H100-SXM5-80GB") > 1.3 * _best_step(datasheet, "H100-SXM5-80GB")
    assert _best_step(measured, "A100-SXM4-80GB") == _best_step(datasheet, "A100-SXM4-80GB")
    assert any("measured ceilings" in note for note in measured.to_dict()["notes"])


def test_a_profile_for_an_unsearched_gpu_is_reported_not_used():
    other = HardwareProfile(gpu_catalog_id="MI300X", gemm_tflops={"bf16": 500.0})
    result = compare(model="llama3-8b", tokens=1e11, gpu_types=["h100"], global_batch=256, max_gpus=8, profile=other)
    assert any("not among the GPU types searched" in note for note in result.to_dict()["notes"])


def test_the_cli_takes_a_profile_file(tmp_path):
    import json
    import subprocess
    import sys

    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"gpu_catalog_id": "H100-SXM5-80GB", "gemm_tflops": {"bf16": 300.0}}))
    args = [sys.executable, "-m", "trainrig", "compare", "--model", "llama3-8b", "--tokens", "1e11", "--gpus",
            "h100", "--max-gpus", "8", "--json"]
    plain = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
    measured = json.loads(subprocess.run([*args, "--profile", str(profile)], capture_output=True, text=True,
                                         check=True).stdout)
    step = [d["rows"][0]["plan"]["estimate"]["step_time_s"] for d in (plain, measured)]
    assert step[1] > step[0]
