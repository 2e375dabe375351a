"""The root CLI: it only registers verbs; each verb lives in `trainrig.cli.commands.<verb>`.

A verb's module (and what it imports: numpy, pydantic, the catalog, FastAPI, torch …) is loaded
only when that verb runs, so `trainrig --help` and every verb start in the time of what they use.
The one-line help of each verb is kept here for the verb list; a test checks that it matches the
first line of the verb's own help.

`trainrig --help` is typer's rich help, but typer's formatter (`typer.rich_utils`) is loaded without paying
for two modules it imports at its top for what this CLI never shows: `rich.markdown` (markdown_it, for
`rich_markup_mode="markdown"`) and `rich.traceback` (pygments, for pretty exceptions, which are off). Each is
replaced by a stand-in while the formatter loads; the stand-in imports the real module the first time it is
used, so nothing is lost, only not paid for up front (about 0.1 s of the help's 0.27 s).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

try:  # recent typer vendors its own click (and `pip install trainrig` brings no other)
    from typer import _click as click
except ImportError:  # older typer runs on click itself
    import click

from trainrig.cli.coercion import defer_coercion
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


# Modules typer's help formatter imports for one class each, which plain help never uses (see above)
DEFERRED_BY_HELP = (("rich.markdown", "Markdown"), ("rich.traceback", "Traceback"))


class _DeferredClass(type):
    """The class of a stand-in: a class attribute it lacks (`Traceback.from_exception`) is the real class's."""

    def __getattr__(cls, name: str) -> Any:
        return getattr(cls.real(), name)


def _stand_in(module_name: str, class_name: str) -> types.ModuleType:
    """A module holding a stand-in for `module_name.class_name`: making one makes the real class's instance."""

    def real(_cls: type | None = None) -> type:
        return getattr(importlib.import_module(module_name), class_name)

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        return real()(*args, **kwargs)

    module = types.ModuleType(module_name, f"stand-in for {module_name}, imported when first used")
    setattr(module, class_name, _DeferredClass(class_name, (), {"__new__": new, "real": classmethod(real),
                                                               "__module__": module_name}))
    return module


def import_help_formatter() -> types.ModuleType:
    """`typer.rich_utils`, loaded with `rich.markdown` and `rich.traceback` deferred until first used."""
    if "typer.rich_utils" in sys.modules:
        return sys.modules["typer.rich_utils"]
    stand_ins = {name: _stand_in(name, cls) for name, cls in DEFERRED_BY_HELP if name not in sys.modules}
    sys.modules.update(stand_ins)
    try:
        return importlib.import_module("typer.rich_utils")
    finally:  # a later `import rich.markdown` (the stand-in's first use included) gets the real module
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


def load_verb(name: str) -> click.Command:
    """The click command of one verb, built from its module's `register(app)`; typer coerces a
    parameter's value only when it has one (`trainrig.cli.coercion`)."""
    verb_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    importlib.import_module(f"trainrig.cli.commands.{name}").register(verb_app)
    command = defer_coercion(typer.main.get_command(verb_app))
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
        import_help_formatter()
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
    if "--help" in sys.argv[1:]:  # a verb's help too: its own formatter is the same module
        import_help_formatter()
    sys.exit(run_guarded(app))
