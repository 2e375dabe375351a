"""`trainrig models`: the model presets as a table or JSON."""

from __future__ import annotations

import typer

from trainrig.answers import models_answer
from trainrig.catalog import load_catalog
from trainrig.cli.common import CatalogOption, JsonOption, console, print_json
from trainrig.report.catalog_tables import model_table


def models(
    json_output: bool = JsonOption,
    catalog: list[str] = CatalogOption,
) -> None:
    """List the model presets with their parameter counts and shapes."""
    if json_output:
        print_json(models_answer(tuple(catalog)))
    else:
        console.print(model_table(list(load_catalog(tuple(catalog)).models)))


def register(app: typer.Typer) -> None:
    app.command("models")(models)
