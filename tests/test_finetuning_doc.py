"""The worked examples of docs/finetuning.md show what the commands print today (issue 11 asks for
each command with its output): an estimate up to its bottleneck panel, a fit whole."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "finetuning.md"


def shown_outputs() -> list[tuple[str, str]]:
    """(command, the output the page shows) for each ``` block that starts with `$ trainrig`."""
    blocks = re.findall(r"```\n\$ (trainrig [^\n]*)\n(.*?)\n```", DOC.read_text(), flags=re.S)
    return [(command, output) for command, output in blocks]


def test_the_page_shows_the_four_worked_examples_and_a_fit():
    commands = [command for command, _ in shown_outputs()]
    assert sum(c.startswith("trainrig estimate examples/finetune/") for c in commands) == 4
    assert any(c.startswith("trainrig fit ") for c in commands)


@pytest.mark.parametrize("command, shown", shown_outputs(), ids=lambda v: v if v.startswith("trainrig") else "")
def test_a_worked_example_prints_what_the_page_shows(command, shown):
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run([sys.executable, "-m", "trainrig", *command.split()[1:]], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=True)
    printed = done.stdout.rstrip("\n").split("\n")
    if command.split()[1] == "estimate":  # the page stops before the bottleneck panel
        printed = printed[:next((i for i, line in enumerate(printed) if line.startswith("╭─")), len(printed))]
    assert "\n".join(printed) == shown, f"docs/finetuning.md is stale for `{command}`: run it and paste the output"
