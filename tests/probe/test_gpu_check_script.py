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


def _skip_unless_a_cpu_machine_with_bash() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the script would run its checks")
    if shutil.which("bash") is None:
        pytest.skip("no bash")


def test_without_a_gpu_it_stops_with_status_2(tmp_path):
    _skip_unless_a_cpu_machine_with_bash()
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "torch sees no CUDA device" in done.stderr
    assert not (tmp_path / "nvml_idle.json").exists() and not (tmp_path / "pip.log").exists()


def _tiny_wheel(folder: Path) -> None:
    """A pure-Python wheel of one module, `gpu_check_probe_mod`, as pip builds them."""
    import zipfile

    name, info = "gpu_check_probe_mod", "gpu_check_probe_mod-1.0.dist-info"
    files = {f"{name}.py": "VALUE = 1\n",
             f"{info}/METADATA": "Metadata-Version: 2.1\nName: gpu_check_probe_mod\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / "gpu_check_probe_mod-1.0-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


def test_with_trainrig_missing_it_installs_the_carried_wheels_first(tmp_path):
    _skip_unless_a_cpu_machine_with_bash()
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / "scripts")
    (checkout / ".whl").mkdir()
    _tiny_wheel(checkout / ".whl")
    site = tmp_path / "site"
    # a python on which trainrig does not import until the carried wheels are on its path
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/bash\nif [ "$1" = -c ] && [ "$2" = "import trainrig.probe" ] && '
                    f'[[ "$PYTHONPATH" != *{site}* ]]; then exit 1; fi\nexec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": str(fake), "SITE": str(site)}
    done = subprocess.run(["bash", str(checkout / "scripts" / "gpu_check.sh")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert (site / "gpu_check_probe_mod.py").is_file(), done.stderr
    assert "installing the wheels in .whl/" in done.stderr
    assert done.returncode == 2 and "torch sees no CUDA device" in done.stderr
