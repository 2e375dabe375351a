"""`trainrig runs`: the runs recorded by the monitor, newest first, with steps and findings."""

from __future__ import annotations

import typer

from trainrig.cli.common import JsonOption, console, print_json
from trainrig.errors import TrainrigError

MAX_LIMIT = 1_000_000
"""More runs than anyone lists; SQLite's LIMIT takes at most 2**63 - 1."""


def runs(
    limit: int = typer.Option(20, "--limit", help="How many of the newest runs to list."),
    json_output: bool = JsonOption,
) -> None:
    """List past monitored runs (database under $TRAINRIG_HOME, default ~/.trainrig)."""
    from trainrig.monitor.home import database_path
    from trainrig.monitor.runs import run_summaries
    from trainrig.monitor.store import Store

    if not 1 <= limit <= MAX_LIMIT:
        raise TrainrigError("--limit", f"must be from 1 to {MAX_LIMIT:,} (got {limit}).")
    summaries = run_summaries(Store.open(database_path()), limit)
    if json_output:
        print_json(summaries)
        return
    if not summaries:
        console.print(f"No runs recorded yet in {database_path()}.")
        return
    from trainrig.report.monitor_report import runs_table

    console.print(runs_table(summaries))


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
