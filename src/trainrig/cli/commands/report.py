"""`trainrig report RUN`: one monitored run — steps, MFU, the estimate, GPUs, host, diagnosis."""

from __future__ import annotations

from pathlib import Path

import typer

from trainrig.cli.commands.probe import check_output_file, write_output_file
from trainrig.cli.common import JsonOption, console, err_console, print_json


def report(
    run: str = typer.Argument(..., help="A run id (see `trainrig runs`) or `latest`."),
    html_path: Path | None = typer.Option(None, "--html", help="Write an HTML report with plots."),
    series: bool = typer.Option(False, "--series", help="With --json: include the time series."),
    json_output: bool = JsonOption,
) -> None:
    """Show a recorded run and what holds it back."""
    from trainrig.monitor.analysis import analyze
    from trainrig.monitor.home import database_path
    from trainrig.monitor.store import Store

    check_output_file(html_path, "--html")  # before the analysis, not after
    store = Store.open(database_path())
    result = analyze(store.load(store.resolve(run)))
    if html_path is not None:
        from trainrig.report.monitor_html import render_html
        from trainrig.report.probe_html import MATPLOTLIB_HINT, plots_available

        write_output_file(html_path, render_html(result), "--html")
        hint = "" if plots_available() else f" (without plots: {MATPLOTLIB_HINT})"
        err_console.print(f"HTML report written to {html_path}{hint}")
    if json_output:
        print_json(result.to_dict(series=series))
        return
    from trainrig.report.monitor_report import report_renderables

    for part in report_renderables(result):
        console.print(part)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
