"""`trainrig models`: the model presets as a table or JSON."""

from __future__ import annotations

import typer

from trainrig.catalog import load_catalog
from trainrig.cli.common import CatalogOption, JsonOption, console, print_json
from trainrig.report.catalog_tables import model_table


def models(
    json_output: bool = JsonOption,
    catalog: list[str] = CatalogOption,
) -> None:
    """List the model presets with their parameter counts and shapes."""
    presets = list(load_catalog(tuple(catalog)).models)
    if json_output:
        print_json([_preset_json(p) for p in presets])
    else:
        console.print(model_table(presets))


def _preset_json(preset) -> dict:
    data = preset.model_dump(mode="json")
    data["n_params"] = preset.spec.n_params
    data["n_active_params"] = preset.spec.n_active_params
    return data


def register(app: typer.Typer) -> None:
    app.command("models")(models)
