"""Re-run every `$ trainrig …` command shown in a markdown file's code blocks and put its output back.

    python scripts/refresh_doc_outputs.py docs/finetuning.md

Each block keeps as many output lines as it had (its first lines: tables, then what binds); a
trailing box's opening line is dropped rather than left unclosed. Run from the repository root
with the project's venv (`.venv/bin/trainrig`), at 120 columns as the docs are laid out.
"""

from __future__ import annotations

import re
import subprocess
import sys

BLOCK = re.compile(r"```\n\$ (trainrig [^\n]+)\n((.*?)\n)```", re.S)


def command_output(command: str, n_lines: int) -> str:
    """The first `n_lines` lines the command prints at 120 columns (an unclosed box's top dropped)."""
    words = command.split()
    result = subprocess.run([".venv/bin/" + words[0], *words[1:]], capture_output=True, text=True,
                            env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"})
    lines = result.stdout.splitlines()[:max(n_lines, 1)]
    while lines and lines[-1].startswith("╭"):
        lines.pop()
    return "\n".join(lines)


def refresh(text: str) -> str:
    def one(match: re.Match) -> str:
        command, body = match.group(1), match.group(3)
        return f"```\n$ {command}\n{command_output(command, body.count(chr(10)) + 1)}\n```"
    return BLOCK.sub(one, text)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        with open(path) as handle:
            text = handle.read()
        with open(path, "w") as handle:
            handle.write(refresh(text))
