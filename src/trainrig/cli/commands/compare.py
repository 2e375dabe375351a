"""`trainrig compare`: the best configuration on each GPU type, side by side."""

from __future__ import annotations

from pathlib import Path

import typer

from trainrig.answers import timed
from trainrig.cli.commands.plan import (
    BatchOption,
    BudgetOption,
    DeadlineOption,
    HeadroomOption,
    MaxGpusOption,
    MaxNodesOption,
    MethodOption,
    ModelOption,
    ObjectiveOption,
    OffersOption,
    PrecisionOption,
    PricedOnlyOption,
    ProfileOption,
    SeqLenOption,
    TokensOption,
    plan_arguments,
)
from trainrig.cli.common import CatalogOption, JsonOption, console, print_json
from trainrig.plan import compare as run_compare
from trainrig.report.plan_report import compare_view


def compare(
    job_file: Path | None = typer.Argument(None, help="Job file whose model and training settings to compare for."),
    model: str | None = ModelOption,
    tokens: float | None = TokensOption,
    gpus: str | None = typer.Option(None, "--gpus", help="GPU types to compare, comma-separated: h100,a100,4090."),
    seq_len: int | None = SeqLenOption,
    global_batch: str | None = BatchOption,
    precision: str | None = PrecisionOption,
    method: str | None = MethodOption,
    deadline_days: float | None = DeadlineOption,
    budget_usd: float | None = BudgetOption,
    max_gpus: int = MaxGpusOption,
    max_nodes: int | None = MaxNodesOption,
    offers: Path | None = OffersOption,
    objective: str = ObjectiveOption,
    priced_only: bool = PricedOnlyOption,
    memory_headroom: float = HeadroomOption,
    profile: Path | None = ProfileOption,
    json_output: bool = JsonOption,
    catalog: list[str] = CatalogOption,
) -> None:
    """Which hardware suits this job: time, cost, memory headroom and what binds, per GPU type."""
    arguments = plan_arguments(job_file, model, tokens, seq_len, global_batch, precision, method, gpus, offers,
                               tuple(catalog), profile)
    result = timed(run_compare, **arguments, deadline_days=deadline_days, budget_usd=budget_usd, max_gpus=max_gpus,
                   max_nodes=max_nodes, objective=objective, priced_only=priced_only,
                   memory_headroom=memory_headroom)
    if json_output:
        print_json(result.to_dict())
    else:
        console.print(compare_view(result))


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
