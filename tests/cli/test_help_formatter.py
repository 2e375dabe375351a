"""`trainrig --help` is typer's rich help, loaded without rich.markdown and rich.traceback (typer's formatter
imports them for what this CLI never shows); the stand-ins that take their place while it loads give the
real classes when used, and the help reads exactly as with the real modules loaded first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainrig.cli.main import VERBS

ROOT = Path(__file__).resolve().parents[2]
DEFERRED = ("rich.markdown", "rich.traceback", "markdown_it", "pygments")


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                          env={"COLUMNS": "100", "PATH": "", "PYTHONPATH": str(ROOT / "src")})
    return done.stdout


HELP = ("import sys\nfrom trainrig.cli.main import main\nsys.argv = ['trainrig', '--help']\ntry:\n    main()\n"
        "except SystemExit:\n    pass\n")


def test_help_lists_every_verb_in_its_panels_without_loading_markdown_or_tracebacks():
    out = _run(HELP + f"print(sorted(m for m in {DEFERRED!r} if m in sys.modules))")
    *help_lines, loaded = out.strip().splitlines()
    assert loaded == "[]"
    assert any("Commands" in line and "╭" in line for line in help_lines)  # typer's rich panels
    for verb in VERBS:
        assert any(line.strip(" │").startswith(verb + " ") for line in help_lines), verb


def test_the_help_is_the_same_as_with_the_real_modules_loaded_first():
    deferred = _run(HELP)
    eager = _run("import rich.markdown, rich.traceback\n" + HELP)
    assert deferred == eager and "Usage: trainrig" in deferred


def test_a_verbs_help_is_the_same_as_with_the_real_modules_loaded_first():
    code = HELP.replace("'--help'", "'gpus', '--help'")
    deferred = _run(code + f"print(sorted(m for m in {DEFERRED!r} if m in sys.modules))")
    eager = _run("import rich.markdown, rich.traceback\n" + code)
    assert deferred == eager + "[]\n" and "--json" in eager


def test_the_stand_ins_give_the_real_classes_once_used():
    out = _run("import sys\nfrom trainrig.cli.main import import_help_formatter\n"
               "utils = import_help_formatter()\n"
               "print('rich.markdown' in sys.modules, 'rich.traceback' in sys.modules)\n"
               "made = utils.Markdown('# a *title*')\n"
               "import rich.markdown, rich.traceback\n"
               "print(type(made) is rich.markdown.Markdown, sys.modules['rich.markdown'] is rich.markdown)\n"
               "print(utils.Traceback.from_exception == rich.traceback.Traceback.from_exception)\n"
               "print(import_help_formatter() is utils)\n")
    assert out.split() == ["False", "False", "True", "True", "True", "True"]
