"""`trainrig fit`: the largest micro-batch and sequence, the fewest GPUs and the cheapest GPU type that fit."""

from __future__ import annotations

from pathlib import Path

import typer

from trainrig.cli.commands.estimate import FLAG_FIELDS, JobFileArgument, job_flag, job_mapping_from_flags, typed_fields
from trainrig.cli.common import SET_HELP, CatalogOption, JsonOption, console, named_as_typed, print_json
from trainrig.fit_answers import MAX_GPUS, TOP_GPUS, fit_answer
from trainrig.report.fit_report import fit_view
from trainrig.specs import base as bounds


def fit(
    job_file: Path | None = JobFileArgument,
    model: str | None = job_flag("model"),
    gpu: str | None = job_flag("gpu"),
    gpus: int | None = job_flag("gpus"),
    gpus_per_node: int | None = job_flag("gpus_per_node"),
    intra_node: str | None = job_flag("intra_node"),
    inter_node: str | None = job_flag("inter_node"),
    seq_len: int | None = job_flag("seq_len"),
    global_batch: int | None = job_flag("global_batch"),
    micro_batch: int | None = job_flag("micro_batch"),
    precision: str | None = job_flag("precision"),
    tp: int | None = job_flag("tp"),
    pp: int | None = job_flag("pp"),
    cp: int | None = job_flag("cp"),
    ep: int | None = job_flag("ep"),
    zero: int | None = job_flag("zero"),
    recompute: str | None = job_flag("recompute"),
    method: str | None = job_flag("method"),
    tokens: float | None = job_flag("tokens", help="Training tokens, to rank GPU types by the run's cost."),
    profile: Path | None = job_flag("profile"),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    max_gpus: int = typer.Option(MAX_GPUS, "--max-gpus", help="Most GPUs to try when growing dp."),
    top: int = typer.Option(TOP_GPUS, "--top", help="How many GPU types to list, cheapest first."),
    json_output: bool = JsonOption,
    catalog: list[str] = CatalogOption,
) -> None:
    """What fits: the largest micro-batch, the longest sequence, the fewest GPUs, the cheapest GPU type."""
    flags = {k: v for k, v in locals().items() if k in FLAG_FIELDS and v is not None}
    max_gpus = bounds.check_number("--max-gpus", max_gpus, whole=True, high=bounds.MAX_GPUS, what="of GPUs")
    top = bounds.check_number("--top", top, whole=True, high=bounds.MAX_BATCH, what="of GPU types")
    with named_as_typed(typed_fields(flags)):
        mapping = job_mapping_from_flags(job_file, flags, set_)
        answer = fit_answer(mapping, max_gpus=max_gpus, top=top, extra_dirs=tuple(catalog))
    if json_output:
        print_json(answer.to_dict())
        return
    console.print(fit_view(answer))


def register(app: typer.Typer) -> None:
    app.command("fit")(fit)
