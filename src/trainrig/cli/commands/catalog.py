"""`trainrig catalog [SECTION]`: what the catalog holds — GPUs, links, CPUs, host memory, storage,
cloud offers, model presets and training frameworks — as a table or JSON."""

from __future__ import annotations

import difflib

import typer

from trainrig.answers import catalog_answer, catalog_sections_answer
from trainrig.catalog import load_catalog
from trainrig.cli.common import CatalogOption, JsonOption, console, fail, print_json
from trainrig.errors import TrainrigError
from trainrig.report import catalog_tables

# section as typed on the command line → (catalog attribute, table builder)
SECTIONS = {
    "gpus": ("gpus", catalog_tables.gpu_table),
    "links": ("links", catalog_tables.link_table),
    "cpus": ("cpus", catalog_tables.cpu_table),
    "host-memory": ("host_memory", catalog_tables.host_memory_table),
    "storage": ("storage", catalog_tables.storage_table),
    "offers": ("offers", catalog_tables.offer_table),
    "models": ("models", catalog_tables.model_table),
    "frameworks": ("frameworks", catalog_tables.framework_table),
}


def catalog(
    section: str = typer.Argument(None, metavar="[SECTION]", show_default=False,
                                  help=f"One of: {', '.join(SECTIONS)}. Without it, every section and its size."),
    json_output: bool = JsonOption,
    catalog: list[str] = CatalogOption,
) -> None:
    """What the catalog holds: GPUs, links, CPUs, host memory, storage, offers, models, frameworks."""
    dirs = tuple(catalog)
    if section is None:
        counts = catalog_sections_answer(dirs)
        if json_output:
            print_json(counts)
            return
        table = catalog_tables.sections_table({name: counts[SECTIONS[name][0]] for name in SECTIONS})
        console.print(table)
        return
    attribute, table = SECTIONS.get(section, (None, None))
    if attribute is None:
        close = difflib.get_close_matches(section, list(SECTIONS), n=1)
        hint = f"did you mean {close[0]}?" if close else f"valid: {', '.join(SECTIONS)}."
        fail(TrainrigError("section", f"'{section}' is not a catalog section; {hint}"))
    if json_output:
        print_json(catalog_answer(attribute, dirs))
    else:
        console.print(table(list(getattr(load_catalog(dirs), attribute))))


def register(app: typer.Typer) -> None:
    app.command("catalog")(catalog)
