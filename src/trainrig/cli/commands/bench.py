"""`trainrig bench`: a short, layer-reduced training step of the job on this machine, measured
beside the estimate of the same scaled job."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import typer

from trainrig.cli.common import CatalogOption, JsonOption, console, err_console, json_text, print_json
from trainrig.errors import TrainrigError


def bench(
    job_file: Path = typer.Argument(..., help="Job file (YAML or JSON)."),
    layers: int | None = typer.Option(None, "--layers", help="Layers to build (default: as many as fit; 2 on CPU)."),
    steps: int = typer.Option(5, "--steps", help="Timed steps; the median is reported."),
    warmup: int = typer.Option(2, "--warmup", help="Untimed steps first (allocator, kernels, optimizer states)."),
    device: str | None = typer.Option(None, "--device", help="cpu | cuda (default: cuda when available)."),
    gpus: int | None = typer.Option(
        None, "--gpus", help="Data-parallel processes on this node, one per GPU (DDP, or FSDP for ZeRO ≥ 1);"
                             " default: the job's dp on the GPUs here; 1 on the CPU."),
    json_output: bool = JsonOption,
    save: Path | None = typer.Option(
        None, "--save", help="Write the run in the measured-run format that `trainrig validate` reads."),
    catalog: list[str] = CatalogOption,
) -> None:
    """Run a short, layer-reduced training step of the job here; measured beside its estimate."""
    from trainrig.bench.run import run_bench
    from trainrig.catalog.job_file import load_job

    job = load_job(job_file, tuple(catalog))
    result, scaled = run_bench(job, layers=layers, steps=steps, warmup=warmup, device=device, progress=_progress,
                               gpus=gpus)
    if save is not None:
        date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        try:
            save.write_text(json_text(result.measured_run(scaled, date)) + "\n", encoding="utf-8")
        except OSError as error:
            raise TrainrigError("--save", f"cannot write {save}: {error.strerror or error}.") from None
        err_console.print(f"saved {save} (check it with `trainrig validate {save}`)", highlight=False)
    if json_output:
        print_json(result.to_dict())
        return
    from trainrig.report.bench_report import bench_view

    console.print(bench_view(result))


def _progress(phase: str, step: int, of_steps: int, loss: float | None) -> None:
    """One line per step on stderr, so `--json` stdout stays pure JSON."""
    err_console.print(f"{phase} step {step}/{of_steps}" + ("" if loss is None else f": loss {loss:.4f}"),
                      highlight=False)


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
