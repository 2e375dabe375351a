"""Every `trainrig …` command the README shows runs as written on a CPU-only machine (issue 15).

The commands run in a scratch directory that holds the repository's `examples/`, so files they write
(profile.json, plans.html) land there; the monitor's database goes to a scratch TRAINRIG_HOME.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip().startswith("trainrig ")]


def test_the_readme_shows_commands_to_check():
    commands = readme_commands()
    assert len(commands) >= 8
    assert any(c.startswith("trainrig monitor") and "examples/train_tiny.py" in c for c in commands)


@pytest.mark.parametrize("command", readme_commands())
def test_a_readme_command_runs_as_written(command, tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    bin_dir = str(Path(sys.executable).parent)  # `trainrig` and `python` of this environment
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
           "TRAINRIG_HOME": str(tmp_path / "home"), "COLUMNS": "120"}
    arguments = shlex.split(command)
    if arguments[1] == "monitor":
        arguments.insert(2, "--no-live")
    done = subprocess.run([sys.executable, "-m", "trainrig", *arguments[1:]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr
