"""`trainrig gpus`: the GPU catalog as a table or JSON."""

from __future__ import annotations

import typer

from trainrig.answers import gpus_answer
from trainrig.catalog import load_catalog
from trainrig.cli.common import CatalogOption, JsonOption, console, print_json
from trainrig.report.catalog_tables import gpu_table


def gpus(
    json_output: bool = JsonOption,
    catalog: list[str] = CatalogOption,
) -> None:
    """List the GPUs the catalog knows, with dense peak rates, memory and links."""
    if json_output:
        print_json(gpus_answer(tuple(catalog)))
    else:
        console.print(gpu_table(list(load_catalog(tuple(catalog)).gpus)))


def register(app: typer.Typer) -> None:
    app.command("gpus")(gpus)
