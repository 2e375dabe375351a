"""`trainrig validate`: the estimator scored against measured runs."""

from __future__ import annotations

from pathlib import Path

import typer

from trainrig.catalog.cases import load_cases
from trainrig.cli.common import CatalogOption, JsonOption, console, print_json
from trainrig.estimate.validation import score_cases
from trainrig.report.validate_report import validation_view
from trainrig.specs.base import MAX_BATCH, check_number


def validate(
    cases: list[Path] = typer.Argument(None, help="Measured-run files or directories; default: the bundled set."),
    summary: bool = typer.Option(False, "--summary", help="Only the per-source table, not every case."),
    worst: int = typer.Option(5, help="How many worst cases to list in --json."),
    profile: Path | None = typer.Option(None, help="A `trainrig probe --save` profile applied to every case."),
    json_output: bool = JsonOption,
    catalog: list[str] = CatalogOption,
) -> None:
    """Run the estimator on measured runs; print measured vs predicted and the % errors."""
    worst = check_number("--worst", worst, low=0, low_ok=True, whole=True, high=MAX_BATCH, what="of cases")
    loaded = load_cases(list(cases or []), tuple(catalog), profile)
    report = score_cases(loaded, n_worst=worst)
    if json_output:
        print_json(report.to_dict())
    else:
        console.print(validation_view(report, show_cases=not summary))


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
