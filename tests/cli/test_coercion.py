"""typer coerces a parameter's value only when it has one (`trainrig.cli.coercion`): the stand-in answers an
absent value exactly as typer's own coercion does, hands every other value to typer (bad ones still end in
typer's message and exit 2), and `estimate --json` neither builds an adapter per option nor imports rich."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainrig.cli.coercion import AbsentValueCoercion, defer_coercion
from trainrig.cli.common import run_guarded
from trainrig.cli.main import VERBS, app, load_verb

try:
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer runs on click itself
    import click

ROOT = Path(__file__).resolve().parents[2]


def _commands(command):
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from _commands(sub)


def _params(verb: str):
    """(command, parameter) for every parameter of the verb, its help option included."""
    for command in _commands(load_verb(verb)):
        ctx = click.Context(command, info_name=command.name)
        for param in command.get_params(ctx):
            yield command, param


def _outcome(coerce, value, param, ctx):
    try:
        result = coerce(value, param=param, ctx=ctx)
    except Exception as error:  # noqa: BLE001 - the exception itself is what is compared
        return "raised", type(error), str(error)
    return "value", type(result), result


@pytest.mark.parametrize("verb", list(VERBS))
def test_the_stand_in_answers_absent_values_as_typer_does(verb):
    for command, param in _params(verb):
        ctx = click.Context(command, info_name=command.name)
        multi_value = param.multiple or param.nargs == -1
        for value in (None, (), []) if multi_value else (None,):
            param._runtime_param = None
            typer_answer = _outcome(param.get_runtime_param().coerce, value, param, ctx)
            param._runtime_param = AbsentValueCoercion()
            stand_in_answer = _outcome(param._runtime_param.coerce, value, param, ctx)
            assert stand_in_answer == typer_answer, (verb, param.name, value)
            assert isinstance(param._runtime_param, AbsentValueCoercion), "an absent value built typer's coercion"


def test_a_given_value_gets_typers_coercion_built_and_kept():
    command = load_verb("estimate")
    param = next(p for p in command.params if p.name == "gpus")
    assert isinstance(param._runtime_param, AbsentValueCoercion), "typer's hook moved: coercion is built eagerly"
    ctx = click.Context(command, info_name="estimate")
    assert param._runtime_param.coerce("8", param=param, ctx=ctx) == 8
    built = param._runtime_param
    assert not isinstance(built, AbsentValueCoercion) and built is param.get_runtime_param()
    with pytest.raises(Exception, match="valid integer") as raised:
        param._runtime_param.coerce("eight", param=param, ctx=ctx)
    assert type(raised.value).__name__ == "BadParameter"


def test_every_verb_parameter_gets_the_stand_in():
    for verb in VERBS:
        for command in _commands(load_verb(verb)):
            for param in command.params:
                assert isinstance(param._runtime_param, AbsentValueCoercion), (verb, param.name)


def test_defer_coercion_leaves_a_parameter_without_typers_hook_alone():
    param = SimpleNamespace(name="n")  # e.g. a plain click parameter, or a typer release without the hook
    command = SimpleNamespace(params=[param], commands={})
    assert defer_coercion(command) is command and not hasattr(param, "_runtime_param")


@pytest.mark.parametrize(("args", "message"), [
    (["--gpus", "abc"], "error: Invalid value for '--gpus': Input should be a valid integer, unable to parse string "
                        "as an integer (see `trainrig estimate --help`)."),
    (["--tokens", "xyz"], "error: Invalid value for '--tokens': Input should be a valid number, unable to parse "
                          "string as a number (see `trainrig estimate --help`)."),
    (["--price", ""], "error: Invalid value for '--price': Input should be a valid number, unable to parse string "
                      "as a number (see `trainrig estimate --help`)."),
])
def test_a_bad_value_is_still_typers_sentence_and_exit_2(capsys, args, message):
    code = run_guarded(app, ["estimate", "--model", "llama3-8b", "--gpu", "h100", *args, "--json"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert " ".join(captured.err.split()) == message


def _loaded_after_cli(args: list[str], modules: tuple[str, ...]) -> list[str]:
    code = (f"import sys\nfrom trainrig.cli.main import main\nsys.argv = ['trainrig', *{args!r}]\ntry:\n"
            "    main()\nexcept SystemExit as done:\n    assert done.code in (0, None), done.code\n"
            f"print(sorted(m for m in {modules!r} if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={"PATH": "", "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr.strip().splitlines()[-1]


def test_estimate_json_imports_no_rich_and_builds_no_adapter_per_option():
    # typer._adapters comes with the one value typer coerces (the job file's path); the options left out add none
    loaded = _loaded_after_cli(["estimate", "examples/llama3-8b-8xh100.yaml", "--json"],
                               ("rich", "rich.console", "rich.table", "trainrig.report.estimate_report"))
    assert loaded == "[]"


def test_the_estimate_table_still_prints_with_rich():
    loaded = _loaded_after_cli(["estimate", "examples/llama3-8b-8xh100.yaml"], ("rich.console", "rich.table"))
    assert loaded == "['rich.console', 'rich.table']"
