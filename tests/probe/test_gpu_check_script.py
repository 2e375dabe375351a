"""scripts/gpu_check.sh on a machine without a GPU: it parses, every file it runs exists, and it
stops with exit status 2 and one line saying why, before it records or installs anything."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def test_the_script_parses_and_names_only_files_that_exist():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    text = SCRIPT.read_text()
    named = set(re.findall(r"((?:benchmarks|tests)/[\w/]+\.py)", text))
    assert {"benchmarks/bench_set.py", "benchmarks/bench_profile.py", "tests/probe/test_gpu.py"} <= named
    assert all((ROOT / path).is_file() for path in named), named


def test_without_a_gpu_it_stops_with_status_2(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the script would run its checks")
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "torch sees no CUDA device" in done.stderr
    assert not (tmp_path / "nvml_idle.json").exists() and not (tmp_path / "pip.log").exists()
