"""The root CLI loads a verb's module only when that verb runs, and lists every verb without loading any."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainrig.cli.main import VERBS, load_verb


@pytest.mark.parametrize("verb", list(VERBS))
def test_the_listed_one_line_help_is_the_verbs_own(verb):
    own = (load_verb(verb).help or "").strip().splitlines()[0]
    assert VERBS[verb] == own


def test_help_lists_every_verb_and_imports_no_verb_module_nor_numpy():
    code = ("import sys\nfrom trainrig.cli.main import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('trainrig.cli.commands.') or m in "
            "('numpy', 'pydantic', 'trainrig.catalog')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"COLUMNS": "200", "PATH": ""})
    *help_lines, loaded = done.stdout.strip().splitlines()
    assert loaded == "[]"
    for verb in VERBS:
        assert any(line.strip(" │").startswith(verb + " ") for line in help_lines), verb


def test_import_trainrig_loads_neither_numpy_nor_pydantic_until_used():
    code = ("import sys, trainrig\nbefore = {'numpy', 'pydantic'} & set(sys.modules)\n"
            "trainrig.estimate\nafter = {'numpy', 'pydantic'} & set(sys.modules)\nprint(sorted(before), sorted(after))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[] ['numpy', 'pydantic']"


def test_importing_a_subpackage_keeps_the_public_function_of_the_same_name():
    code = ("import trainrig, trainrig.plan.search, trainrig.estimate.core, trainrig.monitor.store\n"
            "print(callable(trainrig.plan), callable(trainrig.estimate), callable(trainrig.monitor))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True True True"


def test_an_unknown_verb_is_one_sentence_and_exit_2():
    done = subprocess.run([sys.executable, "-m", "trainrig", "nosuchverb"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "nosuchverb" in done.stderr


def test_the_cli_runs_without_click_installed():
    """`pip install trainrig` brings typer, which vendors click; the CLI must not need click itself
    (the test extras pull it in through uvicorn, which would hide the missing dependency)."""
    code = ("import sys\nsys.modules['click'] = None  # import click now fails\n"
            "from trainrig.cli.main import app\n"
            "for args in (['--help'], ['gpus', '--json'], ['estimate', 'examples/llama3-8b-8xh100.yaml', '--json']):\n"
            "    try:\n        app(args)\n"
            "    except SystemExit as done:\n        assert done.code in (0, None), (args, done.code)\n")
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
