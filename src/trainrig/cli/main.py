"""The root CLI: it only registers verbs; each verb lives in `trainrig.cli.commands.<verb>`."""

from __future__ import annotations

import importlib
import sys

import typer

from trainrig.cli.common import run_guarded

app = typer.Typer(
    name="trainrig",
    help="Will it fit, how long, what cost, which hardware — and does the machine deliver?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines `register(app)`; listed here in the order `trainrig --help` shows them.
VERBS = ("estimate", "fit", "plan", "compare", "validate", "models", "gpus", "probe", "monitor", "runs", "report",
         "serve")

for verb in VERBS:
    importlib.import_module(f"trainrig.cli.commands.{verb}").register(app)


def main() -> None:
    """Console entry point: bad input ends in one sentence and exit code 2, never a traceback."""
    sys.exit(run_guarded(app))
