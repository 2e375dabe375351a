"""`trainrig plan`: the best hardware and configuration for a training job, under a deadline and budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from trainrig.answers import timed
from trainrig.catalog.files import load_data_file
from trainrig.catalog.job_file import load_profile, read_job_file
from trainrig.catalog.registry import build_section
from trainrig.cli.common import CatalogOption, JsonOption, console, err_console, print_json
from trainrig.errors import TrainrigError
from trainrig.plan import plan as run_plan
from trainrig.report.plan_report import plan_view
from trainrig.specs import Offer

ModelOption = typer.Option(None, "--model", help="Model preset, config.json path (or give a job file).")
TokensOption = typer.Option(None, "--tokens", help="Training tokens, e.g. 2e12.")
SeqLenOption = typer.Option(None, "--seq-len", help="Tokens per sequence (default 4096).")
BatchOption = typer.Option(None, "--global-batch", help="Sequences per step, or a range such as 512-2048.")
PrecisionOption = typer.Option(None, "--precision", help="fp32 | fp16 | bf16 | fp8 | fp4 (default bf16).")
MethodOption = typer.Option(None, "--method", help="full | lora | qlora (default full).")
DeadlineOption = typer.Option(None, "--deadline-days", help="Finish within this many days.")
BudgetOption = typer.Option(None, "--budget-usd", help="Spend at most this many US dollars.")
MaxGpusOption = typer.Option(1024, "--max-gpus", help="Largest number of GPUs to consider.")
MaxNodesOption = typer.Option(None, "--max-nodes", help="Largest number of nodes to consider.")
GpusOption = typer.Option(None, "--gpus", help="Allowed GPU types, comma-separated (h100,a100,mi300x); default all.")
OffersOption = typer.Option(None, "--offers", help="YAML file of offers to use instead of the catalog's.")
ObjectiveOption = typer.Option("cost", "--objective", help="cost | time | pareto.")
PricedOnlyOption = typer.Option(False, "--priced-only", help="Only hardware with a known price (cloud offers).")
ProfileOption = typer.Option(None, "--profile", help="A `trainrig probe --save` profile for the GPU type it measured.")
HeadroomOption = typer.Option(0.1, "--memory-headroom", help="Share of GPU memory a plan must leave free (0–0.5).")


def plan(
    job_file: Path | None = typer.Argument(None, help="Job file whose model and training settings to plan for."),
    model: str | None = ModelOption,
    tokens: float | None = TokensOption,
    seq_len: int | None = SeqLenOption,
    global_batch: str | None = BatchOption,
    precision: str | None = PrecisionOption,
    method: str | None = MethodOption,
    deadline_days: float | None = DeadlineOption,
    budget_usd: float | None = BudgetOption,
    max_gpus: int = MaxGpusOption,
    max_nodes: int | None = MaxNodesOption,
    gpus: str | None = GpusOption,
    offers: Path | None = OffersOption,
    objective: str = ObjectiveOption,
    top: int = typer.Option(5, "--top", help="How many configurations to show."),
    priced_only: bool = PricedOnlyOption,
    memory_headroom: float = HeadroomOption,
    profile: Path | None = ProfileOption,
    plot: Path | None = typer.Option(None, "--plot", help="Draw the time–cost front and step breakdowns (.png/.html)."),
    json_output: bool = JsonOption,
    catalog: list[str] = CatalogOption,
) -> None:
    """What to rent, how to run it, how long it takes and what it costs: the top configurations."""
    arguments = plan_arguments(job_file, model, tokens, seq_len, global_batch, precision, method, gpus, offers,
                               tuple(catalog), profile)
    check_plot_path(plot)
    result = timed(run_plan, **arguments, deadline_days=deadline_days, budget_usd=budget_usd, max_gpus=max_gpus,
                   max_nodes=max_nodes, objective=objective, top_k=top, priced_only=priced_only,
                   memory_headroom=memory_headroom)
    if json_output:
        print_json(result.to_dict())
    else:
        console.print(plan_view(result))
    if plot is not None:
        from trainrig.report.plan_plots import plan_plot

        write_plot(plot, plan_plot(result, plot.suffix.lower()))
    if not result.feasible:
        raise typer.Exit(code=1)


def plan_arguments(job_file: Path | None, model: str | None, tokens: float | None, seq_len: int | None,
                   global_batch: str | None, precision: str | None, method: str | None, gpus: str | None,
                   offers: Path | None, catalog: tuple[str, ...], profile: Path | None = None) -> dict[str, Any]:
    """The arguments `plan`/`compare` share: flags over the job file's model, training section and
    hardware profile."""
    data = read_job_file(job_file) if job_file else {}
    for section in ("hardware", "training"):
        if not isinstance(data.get(section) or {}, dict):  # `hardware: 5`: one sentence, not an AttributeError
            raise TrainrigError(section, f"must be a mapping of {section} settings (got {data[section]!r:.40}).")
    profile_source = str(profile) if profile else (data.get("hardware") or {}).get("profile")
    training = dict(data.get("training") or {})
    model_source = model or data.get("model")
    if not model_source:
        raise TrainrigError("model", "is required: give --model (e.g. --model llama3-70b) or a job file.")
    chosen = {"tokens": tokens, "seq_len": seq_len, "global_batch": global_batch, "precision": precision,
              "method": method}
    defaults = {"tokens": None, "seq_len": 4096, "global_batch": 1024, "precision": "bf16", "method": "full"}
    values = {k: v if v is not None else training.pop(k, defaults[k]) for k, v in chosen.items()}
    for key in chosen:
        training.pop(key, None)
    if values["tokens"] is None:
        raise TrainrigError("tokens", "is required: give --tokens (e.g. 2e12) or training.tokens in the job file.")
    return {**values, "model": model_source, "training": training, "catalog_dirs": catalog,
            "gpu_types": _gpu_list(gpus), "offers": load_offers_file(offers) if offers else None,
            "profile": load_profile(profile_source) if profile_source else None}


def _gpu_list(gpus: str | None) -> list[str] | None:
    if gpus is None:
        return None
    names = [name.strip() for name in gpus.split(",") if name.strip()]
    if not names:
        raise TrainrigError("gpus", "is empty; give GPU names separated by commas, e.g. h100,a100,mi300x.")
    return names


def load_offers_file(path: Path) -> list[Offer]:
    """The offers in a YAML file with an `offers:` list (the catalog's format)."""
    content = load_data_file(path, "offers") or {}  # regular UTF-8 files, size and alias limits
    if not isinstance(content, dict) or not isinstance(content.get("offers"), list):
        raise TrainrigError("offers", f"{path} must hold `offers:` with a list of offers, as catalog/data/offers.yaml.")
    try:
        return list(build_section("offer", "offers", Offer, [(path, item) for item in content["offers"]]))
    except TrainrigError as error:
        raise TrainrigError("offers", error.message) from None


def check_plot_path(path: Path | None) -> None:
    if path is not None and path.suffix.lower() not in (".png", ".html"):
        raise TrainrigError("plot", f"'{path}' must end in .png or .html.")


def write_plot(path: Path, content: bytes | str) -> None:
    try:
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    except OSError as error:
        raise TrainrigError("plot", f"cannot write {path} ({error.strerror}).") from None
    err_console.print(f"plot written to {path}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
