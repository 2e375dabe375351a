"""`trainrig fit`: the largest micro-batch and sequence, the fewest GPUs and the cheapest GPU type that fit."""

from __future__ import annotations

from pathlib import Path

import typer

from trainrig.cli.commands.estimate import FLAG_FIELDS, job_mapping_from_flags, typed_fields
from trainrig.cli.common import SET_HELP, CatalogOption, JsonOption, console, named_as_typed, print_json
from trainrig.fit_answers import MAX_GPUS, TOP_GPUS, fit_answer
from trainrig.report.fit_report import fit_view
from trainrig.specs import base as bounds


def fit(
    job_file: Path | None = typer.Argument(None, help="Job file (YAML or JSON); flags override its values."),
    model: str | None = typer.Option(None, help="Model preset, config.json path."),
    gpu: str | None = typer.Option(None, help="GPU catalog name (h100, a100-80gb, mi300x …)."),
    gpus: int | None = typer.Option(None, help="Number of GPUs."),
    gpus_per_node: int | None = typer.Option(None, help="GPUs per node."),
    intra_node: str | None = typer.Option(None, help="Link between GPUs in a node (nvlink4, pcie4-x16 …)."),
    inter_node: str | None = typer.Option(None, help="Network between nodes (ib-ndr, eth-100g …)."),
    seq_len: int | None = typer.Option(None, help="Tokens per sequence."),
    global_batch: int | None = typer.Option(None, help="Sequences per optimizer step."),
    micro_batch: int | None = typer.Option(None, help="Sequences per GPU per forward/backward."),
    precision: str | None = typer.Option(None, help="fp32 | fp16 | bf16 | fp8."),
    tp: int | None = typer.Option(None, help="Tensor-parallel degree."),
    pp: int | None = typer.Option(None, help="Pipeline-parallel stages."),
    cp: int | None = typer.Option(None, help="Context-parallel degree."),
    ep: int | None = typer.Option(None, help="Expert-parallel degree."),
    zero: int | None = typer.Option(None, help="ZeRO stage 0–3 (FSDP full shard = 3)."),
    recompute: str | None = typer.Option(None, help="none | selective | full."),
    method: str | None = typer.Option(None, help="full | lora | qlora."),
    tokens: float | None = typer.Option(None, help="Training tokens, to rank GPU types by the run's cost."),
    profile: Path | None = typer.Option(None, help="A `trainrig probe --save` profile to use instead of datasheets."),
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
