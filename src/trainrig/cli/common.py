"""What every verb shares: the error boundary, the console, JSON output and common options."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import typer
from rich.console import Console

from trainrig.errors import TrainrigError

__all__ = ["console", "err_console", "run_guarded", "print_json", "fail", "CatalogOption", "JsonOption"]

def _width() -> int | None:
    """Terminal width; when output goes to a pipe or a file (rich would assume 80 columns), 120 so
    tables stay readable in logs. COLUMNS still wins."""
    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return None
    return 120


console = Console(width=_width())
err_console = Console(stderr=True, width=_width())

CatalogOption = typer.Option(
    [], "--catalog", help="Extra catalog directory of YAML files (repeatable); also TRAINRIG_CATALOG."
)
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")


def fail(error: TrainrigError) -> None:
    """Print the one-sentence error and exit with code 2."""
    err_console.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def run_guarded(app: typer.Typer) -> int:
    """Run the app; typer handles usage errors (exit 2), a TrainrigError ends here (exit 2)."""
    try:
        app()
    except TrainrigError as error:
        err_console.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        return 2
    return 0


def print_json(data: Any) -> None:
    """JSON on stdout, nothing else, so scripts can pipe it."""
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
