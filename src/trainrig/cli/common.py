"""What every verb shares: the error boundary, the console, JSON output and common options.

`console` and `err_console` are rich Consoles made on first use (PEP 562), so a verb that prints
only JSON (`estimate --json`) never imports rich's console; `from trainrig.cli.common import console`
makes the console then, as before.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from trainrig.cli.coercion import defer_coercion
from trainrig.errors import TrainrigError

try:  # recent typer vendors its own click; older ones raise click's exceptions
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - typer < 0.20
    from click import exceptions as click_errors

__all__ = ["console", "err_console", "run_guarded", "print_json", "json_text", "fail", "named_as_typed",
           "CatalogOption", "JsonOption"]

# Numbers docs/contract.md promises in every estimate (they are never null): a non-finite one is an
# error, not a silent null. Every other non-finite number (a total time, a cost, a score over no
# cases) means "not known" and is printed as null, so `--json` is always valid JSON.
REQUIRED_NUMBER_KEYS = frozenset({
    "memory_per_gpu_gib", "memory_breakdown_gib", "step_time_s", "step_breakdown_s", "tokens_per_s",
    "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu",
})

def _width() -> int | None:
    """Terminal width; when output goes to a pipe or a file (rich would assume 80 columns), 120 so
    tables stay readable in logs. COLUMNS still wins."""
    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return None
    return 120


if TYPE_CHECKING:  # made by __getattr__ below on first use
    from rich.console import Console

    console: Console
    err_console: Console


def __getattr__(name: str) -> Any:
    """`console` (stdout) and `err_console` (stderr), each made the first time it is asked for."""
    if name not in ("console", "err_console"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    value = globals()[name] = Console(stderr=name == "err_console", width=_width())
    return value


def _err_console() -> Any:
    made = globals().get("err_console")
    return made if made is not None else __getattr__("err_console")

CatalogOption = typer.Option(
    [], "--catalog", help="Extra catalog directory of YAML files (repeatable); also TRAINRIG_CATALOG."
)
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")
SET_HELP = ("Change the job: key=value, repeatable. Keys: any hardware or training field, with or without its "
            "section (zero=3, training.zero=3, inter_node=eth-100g), model, or a short name (gpus, pcie, cpu_cores,"
            " ram_gb, network); all listed in docs/job-file.md.")


def fail(error: TrainrigError) -> None:
    """Print the one-sentence error and exit with code 2."""
    _print_error(str(error))
    raise typer.Exit(code=2)


def run_guarded(app: typer.Typer, args: Sequence[str] | None = None) -> int:
    """Run the app and return its exit code: bad input of any kind (a TrainrigError, or a usage error
    such as a bad option value, a missing argument or an unknown option) ends in one sentence on
    stderr and exit code 2, never in typer's multi-line usage box or a traceback."""
    command = defer_coercion(typer.main.get_command(app))
    try:
        # not standalone: click hands usage errors to us instead of printing its box and exiting;
        # --help still prints and ends in click's Exit(0), which comes back as the return value
        code = command.main(args=args, prog_name="trainrig", standalone_mode=False)
    except TrainrigError as error:
        return _print_error(str(error))
    except click_errors.NoArgsIsHelpError as error:  # bare `trainrig`: the help, as before
        _err_console().print(error.format_message(), highlight=False, markup=False)
        return 2
    except click_errors.UsageError as error:
        return _print_error(_usage_sentence(error))
    except click_errors.ClickException as error:  # e.g. a file option that cannot be opened
        _print_error(error.format_message())
        return error.exit_code
    except typer.Abort:
        return _print_error("aborted.", code=130)
    return code if isinstance(code, int) and not isinstance(code, bool) else 0


def _print_error(sentence: str, code: int = 2) -> int:
    from rich.markup import escape

    _err_console().print(f"[bold red]error:[/] {escape(sentence)}", highlight=False, soft_wrap=True)
    return code


def _usage_sentence(error: click_errors.UsageError) -> str:
    """click's message as one line, pointing at the verb's --help."""
    message = " ".join(error.format_message().split()).rstrip(".")
    command = error.ctx.command_path if error.ctx is not None else "trainrig"
    return f"{message} (see `{command} --help`)."


@contextmanager
def named_as_typed(flag_fields: Mapping[str, str]) -> Iterator[None]:
    """Errors about a field the user set with a flag also name that flag (`training.pp (--pp)`): the
    job-file path alone is a name they never typed. `flag_fields` maps a dotted field to its option."""
    try:
        yield
    except TrainrigError as error:
        flag = flag_fields.get(error.field)
        if flag is None or flag == f"--{error.field}":  # `--model` and `model` need no gloss
            raise
        raise TrainrigError(f"{error.field} ({flag})", error.message) from None


def print_json(data: Any) -> None:
    """JSON on stdout, nothing else, so scripts can pipe it."""
    sys.stdout.write(json_text(data) + "\n")


def json_text(data: Any) -> str:
    """Strict JSON (never NaN or Infinity, which json.loads elsewhere refuses): a non-finite number
    becomes null, except in the contract's always-numeric estimate keys, where it is an error."""
    return json.dumps(_finite(data, ()), indent=2, allow_nan=False)


def _finite(value: Any, path: tuple[str, ...]) -> Any:
    if isinstance(value, Mapping):
        return {key: _finite(item, (*path, str(key))) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item, path) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        if REQUIRED_NUMBER_KEYS.intersection(path):
            raise TrainrigError(".".join(path), f"came out {value}, not a finite number: some figure of the job"
                                                " is too extreme to compute with.")
        return None
    if value is None or isinstance(value, str | int | float):
        return value
    return _finite(_json_default(value), path)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
