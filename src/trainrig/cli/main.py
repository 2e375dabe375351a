"""The root CLI: it only registers verbs; each verb lives in `trainrig.cli.commands.<verb>`.

A verb's module (and what it imports: numpy, pydantic, the catalog, FastAPI, torch …) is loaded
only when that verb runs, so `trainrig --help` and every verb start in the time of what they use.
The one-line help of each verb is kept here for the verb list; a test checks that it matches the
first line of the verb's own help.
"""

from __future__ import annotations

import importlib
import sys

import typer
from typer.core import TyperCommand, TyperGroup

try:  # recent typer vendors its own click (and `pip install trainrig` brings no other)
    from typer import _click as click
except ImportError:  # older typer runs on click itself
    import click

from trainrig.cli.common import run_guarded

# The verbs in the order `trainrig --help` lists them, with their one-line help.
VERBS = {
    "estimate": "Will it fit, how fast, what binds — for one configuration.",
    "fit": "What fits: the largest micro-batch, the longest sequence, the fewest GPUs, the cheapest GPU type.",
    "plan": "What to rent, how to run it, how long it takes and what it costs: the top configurations.",
    "compare": "Which hardware suits this job: time, cost, memory headroom and what binds, per GPU type.",
    "validate": "Run the estimator on measured runs; print measured vs predicted and the % errors.",
    "catalog": "What the catalog holds: GPUs, links, CPUs, host memory, storage, offers, models, frameworks.",
    "models": "List the model presets with their parameter counts and shapes.",
    "gpus": "List the GPUs the catalog knows, with dense peak rates, memory and links.",
    "probe": "Measure the machine and say where it falls short of its spec.",
    "bench": "Run a short, layer-reduced training step of the job here; measured beside its estimate.",
    "monitor": "Run a training command (or attach to one) and record GPU, host and step signals; diagnose.",
    "runs": "List past monitored runs (database under $TRAINRIG_HOME, default ~/.trainrig).",
    "report": "Show a recorded run and what holds it back.",
    "serve": "Serve the planner page and its JSON API (/api/…, schema at /openapi.json).",
}


def load_verb(name: str) -> click.Command:
    """The click command of one verb, built from its module's `register(app)`."""
    verb_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    importlib.import_module(f"trainrig.cli.commands.{name}").register(verb_app)
    command = typer.main.get_command(verb_app)
    command.name = name
    return command


class _LazyVerbs(TyperGroup):
    """A command group whose verbs are imported on first use; listing them imports nothing."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in VERBS:
            return None
        if self._listing:  # the verb list needs names and one-line helps only
            return TyperCommand(name=cmd_name, help=VERBS[cmd_name], short_help=VERBS[cmd_name])
        if cmd_name not in self.commands:
            self.commands[cmd_name] = load_verb(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="trainrig",
    cls=_LazyVerbs,
    help="Will it fit, how long, what cost, which hardware — and does the machine deliver?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Will it fit, how long, what cost, which hardware — and does the machine deliver?"""


def main() -> None:
    """Console entry point: bad input ends in one sentence and exit code 2, never a traceback."""
    sys.exit(run_guarded(app))
