"""`trainrig probe`: what this machine really is and really delivers."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from trainrig.cli.common import CatalogOption, JsonOption, console, err_console, print_json
from trainrig.errors import TrainrigError
from trainrig.probe.results import SECTIONS

_SECTION_LIST = ", ".join(SECTIONS)


def probe(
    quick: bool = typer.Option(False, "--quick", help="Short runs and fewer shapes: ≤ 60 s."),
    only: str = typer.Option("", "--only", help=f"Comma-separated sections: {_SECTION_LIST}."),
    time_limit: float | None = typer.Option(None, "--time-limit", help="Global limit in seconds."),
    storage_path: Path | None = typer.Option(
        None, "--storage-path", help="Directory to test storage in (default: current)."),
    save: Path | None = typer.Option(None, "--save", help="Write a HardwareProfile JSON here."),
    json_output: bool = JsonOption,
    html_path: Path | None = typer.Option(None, "--html", help="Write an HTML report with plots."),
    record_nvml: Path | None = typer.Option(
        None, "--record-nvml", help="Record this machine's NVML answers to FILE and stop."),
    nvml_fake: str | None = typer.Option(
        None, "--nvml-fake", help="Replay an NVML recording (shipped name or JSON path)."),
    nproc_per_node: int | None = typer.Option(
        None, "--nproc-per-node", help="Collective ranks per node (default: GPUs, or 2 on CPU)."),
    nnodes: int = typer.Option(1, "--nnodes", help="Nodes for collectives (run on every node)."),
    rdzv_endpoint: str | None = typer.Option(
        None, "--rdzv-endpoint", help="HOST:PORT of the first node, with --nnodes > 1."),
    catalog: list[str] = CatalogOption,
) -> None:
    """Measure the machine and say where it falls short of its spec."""
    if record_nvml is not None:
        _record(record_nvml, nvml_fake)
        return
    options = _options(quick, only, time_limit, storage_path, nvml_fake, nproc_per_node, nnodes,
                       rdzv_endpoint, catalog)
    for path, flag in ((save, "--save"), (html_path, "--html")):
        check_output_file(path, flag)  # before the probe runs: its results must not be lost
    result = _run(options, show_progress=not json_output)
    _write_outputs(result, save, html_path)
    if json_output:
        from trainrig.report.probe_report import probe_json

        print_json(probe_json(result))
    else:
        from trainrig.report.probe_report import probe_renderables

        for part in probe_renderables(result):
            console.print(part)


def _options(quick: bool, only: str, time_limit: float | None, storage_path: Path | None,
             nvml_fake: str | None, nproc_per_node: int | None, nnodes: int,
             rdzv_endpoint: str | None, catalog: list[str]) -> Any:
    from trainrig.probe.nvml_fake import load_recording
    from trainrig.probe.runner import ProbeOptions

    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise TrainrigError("--time-limit", f"must be a positive number of seconds (got {time_limit:g}).")
    if nproc_per_node is not None and nproc_per_node < 1:
        raise TrainrigError("--nproc-per-node", "must be at least 1.")
    if nnodes < 1:
        raise TrainrigError("--nnodes", "must be at least 1.")
    if nnodes > 1 and not rdzv_endpoint:
        raise TrainrigError("--rdzv-endpoint", "is required with --nnodes > 1 (HOST:PORT of the "
                                               "first node).")
    if storage_path is not None:
        _check_storage(storage_path)
    if nvml_fake:
        load_recording(nvml_fake)
    return ProbeOptions(quick=quick, only=_parse_only(only), time_limit_s=time_limit,
                        storage_path=storage_path, nvml_fake=nvml_fake,
                        nproc_per_node=nproc_per_node, nnodes=nnodes, rdzv_endpoint=rdzv_endpoint,
                        catalog_dirs=tuple(catalog))


def _parse_only(only: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip().lower() for n in only.split(",") if n.strip()))
    for name in names:
        if name not in SECTIONS:
            raise TrainrigError("--only", f"unknown benchmark '{name}'; choose from {_SECTION_LIST}.")
    return names


def _check_storage(path: Path) -> None:
    if not path.is_dir():
        raise TrainrigError("--storage-path", f"{path} is not an existing directory.")
    if not os.access(path, os.W_OK):
        raise TrainrigError("--storage-path", f"{path} is not writable.")


def check_output_file(path: Path | None, flag: str) -> None:
    """An output file the command can write: not a directory, in an existing directory, and
    writable (tried by opening it: permission bits do not tell for root or read-only mounts).
    Checked before the work so that a bad path does not throw the results away."""
    if path is None:
        return
    if path.is_dir():
        raise TrainrigError(flag, f"{path} is a directory; give a file name.")
    if not path.parent.resolve().is_dir():
        raise TrainrigError(flag, f"directory {path.parent} does not exist.")
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as error:
        raise TrainrigError(flag, f"cannot write {path} ({error.strerror or error}).") from None
    if not existed:
        path.unlink(missing_ok=True)  # leave no empty file behind if the work fails


def write_output_file(path: Path, text: str, flag: str) -> None:
    try:
        path.write_text(text)
    except OSError as error:
        raise TrainrigError(flag, f"cannot write {path} ({error.strerror or error}).") from None


def _run(options: Any, show_progress: bool) -> Any:
    from trainrig.probe.runner import ending_like_ctrl_c, run_probe

    with ending_like_ctrl_c():  # SIGTERM/SIGHUP: clean up the shard files, then exit
        if not show_progress:
            return run_probe(options)
        with Progress(TextColumn("[bold]{task.description:<12}"), BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                      transient=True) as bars:
            return run_probe(options, _RichProgress(bars))


class _RichProgress:
    """The runner's progress events as rich progress bars (on stderr)."""

    def __init__(self, bars: Progress) -> None:
        self.bars, self.tasks = bars, {}

    def start(self, section: str, total: int) -> None:
        self.tasks[section] = self.bars.add_task(section, total=max(1, total))

    def advance(self, section: str, steps: int = 1) -> None:
        if section in self.tasks:
            self.bars.advance(self.tasks[section], steps)

    def finish(self, section: str) -> None:
        if section in self.tasks:
            task = self.tasks[section]
            self.bars.update(task, completed=self.bars.tasks[task].total)


def _write_outputs(result: Any, save: Path | None, html_path: Path | None) -> None:
    if save is not None:
        from trainrig.probe.profile import to_profile

        write_output_file(save, to_profile(result).model_dump_json(indent=2) + "\n", "--save")
        err_console.print(f"profile written to {save}")
    if html_path is not None:
        from trainrig.report.probe_html import MATPLOTLIB_HINT, plots_available, render_html

        write_output_file(html_path, render_html(result), "--html")
        hint = "" if plots_available() else f" (without plots: {MATPLOTLIB_HINT})"
        err_console.print(f"HTML report written to {html_path}{hint}")


def _record(path: Path, nvml_fake: str | None) -> None:
    from trainrig.probe.nvml import NvmlUnavailable
    from trainrig.probe.nvml_record import record_nvml

    check_output_file(path, "--record-nvml")
    inner = None
    if nvml_fake:
        from trainrig.probe.nvml_fake import FakeNvml

        inner = FakeNvml.from_recording(nvml_fake)
    try:
        recording = record_nvml(path, label=path.stem, inner=inner)
    except NvmlUnavailable as error:
        raise TrainrigError("--record-nvml", f"nothing to record: {error}.") from None
    names = ", ".join(d.get("nvmlDeviceGetName", "?") for d in recording["devices"]) or "no GPU"
    err_console.print(f"NVML recording of {len(recording['devices'])} GPU(s) ({names}) written "
                      f"to {path}")


def register(app: typer.Typer) -> None:
    app.command("probe")(probe)
