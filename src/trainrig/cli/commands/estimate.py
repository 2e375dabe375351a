"""`trainrig estimate`: memory, time and cost of one configuration, from a job file or flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from trainrig.answers import estimate_json, estimate_with_variants
from trainrig.catalog.job_file import apply_change, read_job_file
from trainrig.cli import common
from trainrig.cli.common import SET_HELP, CatalogOption, JsonOption, named_as_typed, print_json
from trainrig.errors import TrainrigError
from trainrig.specs.base import check_number

# flag → (section, job-file field)
FLAG_FIELDS = {
    "model": ("model", None), "gpu": ("hardware", "gpu"), "gpus": ("hardware", "n_gpus"),
    "gpus_per_node": ("hardware", "gpus_per_node"), "intra_node": ("hardware", "intra_node"),
    "inter_node": ("hardware", "inter_node"), "profile": ("hardware", "profile"),
    "seq_len": ("training", "seq_len"), "global_batch": ("training", "global_batch"),
    "micro_batch": ("training", "micro_batch"), "precision": ("training", "precision"),
    "tp": ("training", "tp"), "pp": ("training", "pp"), "cp": ("training", "cp"), "ep": ("training", "ep"),
    "zero": ("training", "zero"), "recompute": ("training", "recompute"), "tokens": ("training", "tokens"),
    "method": ("training", "method"),
}
# flag → its help, for every verb that takes a job (estimate, fit): one text per flag
FLAG_HELP = {
    "model": "Model preset, config.json path.", "gpu": "GPU catalog name (h100, a100-80gb, mi300x …).",
    "gpus": "Number of GPUs.", "gpus_per_node": "GPUs per node.",
    "intra_node": "Link between GPUs in a node (nvlink4, pcie4-x16 …).",
    "inter_node": "Network between nodes (ib-ndr, eth-100g …).",
    "profile": "A `trainrig probe --save` profile to use instead of datasheets.",
    "seq_len": "Tokens per sequence.", "global_batch": "Sequences per optimizer step.",
    "micro_batch": "Sequences per GPU per forward/backward.", "precision": "fp32 | fp16 | bf16 | fp8 | fp4.",
    "tp": "Tensor-parallel degree.", "pp": "Pipeline-parallel stages.", "cp": "Context-parallel degree.",
    "ep": "Expert-parallel degree.", "zero": "ZeRO stage 0–3 (FSDP full shard = 3).",
    "recompute": "none | selective | full.", "tokens": "Training tokens, for total time and cost.",
    "method": "full | lora | qlora.",
}
JobFileArgument = typer.Argument(None, help="Job file (YAML or JSON); flags override its values.")


def job_flag(name: str, help: str | None = None) -> Any:  # noqa: A002 — typer's own keyword
    """The option of one job flag (FLAG_FIELDS), with its shared help unless a verb words it its own way."""
    return typer.Option(None, help=help or FLAG_HELP[name])


def estimate(
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
    tokens: float | None = job_flag("tokens"),
    profile: Path | None = job_flag("profile"),
    price: float | None = typer.Option(None, help="Price per GPU-hour in USD, for the cost."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    what_if: list[str] = typer.Option(
        [], "--what-if", help="A variant to show beside the base: key=value with the keys of --set (repeatable)."
    ),
    json_output: bool = JsonOption,
    catalog: list[str] = CatalogOption,
) -> None:
    """Will it fit, how fast, what binds — for one configuration."""
    flags = {k: v for k, v in locals().items() if k in FLAG_FIELDS and v is not None}
    if price is not None:
        price = check_number("--price", price, what="of US dollars per GPU-hour")
    with named_as_typed(typed_fields(flags)):
        mapping = job_mapping_from_flags(job_file, flags, set_)
        base, variants = estimate_with_variants(mapping, what_if, price, tuple(catalog))
    if json_output:
        print_json(estimate_json(base, variants))
        return
    from trainrig.report.estimate_report import estimate_view, what_if_table  # rich, for tables only

    common.console.print(estimate_view(base))
    if variants:
        common.console.print(what_if_table(base, variants))


def typed_fields(flags: dict[str, Any]) -> dict[str, str]:
    """The dotted field each given flag sets, mapped to the option as typed (`training.pp` → `--pp`)."""
    fields = {}
    for flag in flags:
        section, field = FLAG_FIELDS[flag]
        fields[f"{section}.{field}" if field else section] = "--" + flag.replace("_", "-")
    return fields


def job_mapping_from_flags(job_file: Path | None, flags: dict[str, Any], changes: list[str]) -> dict[str, Any]:
    """The job a verb was given: the file's mapping, then the flags of FLAG_FIELDS, then `--set` changes."""
    mapping: dict[str, Any] = read_job_file(job_file) if job_file else {}
    mapping = {k: (dict(v) if isinstance(v, dict) else v) for k, v in mapping.items()}
    for section in ("hardware", "training"):
        # `hardware: 5` or a list: said here, before a flag or the checks below index into it
        if mapping.get(section) is not None and not isinstance(mapping[section], dict):
            raise TrainrigError(section, f"must be a mapping of {section} settings (got {_short(mapping[section])}).")
    for flag, value in flags.items():
        section, field = FLAG_FIELDS[flag]
        if section == "model":
            mapping["model"] = value
        else:
            mapping.setdefault(section, {})[field] = str(value) if isinstance(value, Path) else value
    if "hardware" in mapping and "gpus" in flags and "gpus_per_node" not in flags and not job_file:
        mapping["hardware"].setdefault("gpus_per_node", min(flags["gpus"], 8))
    for change in changes:
        mapping = apply_change(mapping, change)
    if not mapping.get("model"):
        raise TrainrigError("model", "is required: give a job file or --model (e.g. --model llama3-8b).")
    if not mapping.get("hardware", {}).get("gpu"):
        raise TrainrigError("hardware.gpu", "is required: give a job file or --gpu (e.g. --gpu h100).")
    return mapping


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def register(app: typer.Typer) -> None:
    app.command("estimate")(estimate)
