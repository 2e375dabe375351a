"""`trainrig monitor -- CMD …` / `trainrig monitor --pid N`: record a training job and diagnose it."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import typer

from trainrig.cli.common import JsonOption, console, err_console, print_json
from trainrig.errors import TrainrigError
from trainrig.units import GIB


def monitor(
    command: list[str] = typer.Argument(None, help="The command to run and follow, after `--`."),
    pid: int | None = typer.Option(None, "--pid", help="Attach to a running process and its children."),
    duration: float | None = typer.Option(None, "--duration", help="With --pid: stop after S seconds."),
    hz: float = typer.Option(2.0, "--hz", help="Samples per second, 1–10."),
    job: Path | None = typer.Option(None, "--job", help="Job file: compare with its estimate, MFU."),
    name: str | None = typer.Option(None, "--name", help="A name for the run."),
    gpus: str | None = typer.Option(None, "--gpus", help="GPU indices to sample, e.g. 0,1 (default all)."),
    prometheus: int | None = typer.Option(None, "--prometheus", help="Serve metrics on this port."),
    prometheus_host: str = typer.Option(
        "127.0.0.1", "--prometheus-host",
        help="Address the metrics listen on (default loopback; 0.0.0.0 for every interface)."),
    flops_per_token: float | None = typer.Option(None, "--flops-per-token", help="Training FLOPs per token."),
    peak_tflops: float | None = typer.Option(None, "--peak-tflops", help="Peak TFLOP/s per device for MFU."),
    devices: int | None = typer.Option(None, "--devices", help="Devices the reported tokens ran on."),
    memory_limit_gib: float | None = typer.Option(None, "--memory-limit-gib", help="The job's host-memory budget."),
    nvml_fake: str | None = typer.Option(None, "--nvml-fake", help="Replay an NVML recording instead of the GPUs."),
    live: bool = typer.Option(True, "--live/--no-live", help="Show the live view (on a terminal)."),
    json_output: bool = JsonOption,
) -> None:
    """Run a training command (or attach to one) and record GPU, host and step signals; diagnose."""
    from trainrig.monitor.home import database_path
    from trainrig.monitor.store import Store
    from trainrig.monitor.supervise import Supervisor, shell_exit_code

    if bool(command) == (pid is not None):
        raise TrainrigError("COMMAND", "give either a command after `--` or --pid N, not both "
                                       "and not neither.")
    _check_positive(duration, "--duration", "a positive number of seconds")
    _check_port(prometheus, prometheus_host)
    config = _config(hz, job, name or _default_name(command, pid), gpus, flops_per_token,
                     peak_tflops, devices, memory_limit_gib, nvml_fake)
    store = Store.open(database_path(), memory_if_full=True)  # a full disk must not stop the job
    supervisor = Supervisor(store, config, prometheus_port=prometheus,
                            prometheus_host=prometheus_host)
    code = _follow(supervisor, command, pid, duration, live and not json_output, json_output)
    _present(store, supervisor.run_id, json_output)
    _warn_if_unwritten(store)
    if code:
        raise typer.Exit(code=shell_exit_code(code))


def _check_positive(value: float | None, flag: str, what: str) -> None:
    """NaN and infinity are refused too (`nan <= 0` is False)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise TrainrigError(flag, f"must be {what} (got {value:g}).")


def _check_port(port: int | None, host: str) -> None:
    if port is not None and not 0 <= port <= 65535:
        raise TrainrigError("--prometheus", f"must be a TCP port from 0 to 65535 (got {port}).")
    if not host.strip():
        raise TrainrigError("--prometheus-host", "must be an address such as 127.0.0.1 or 0.0.0.0.")


def _warn_if_unwritten(store: Any) -> None:
    """Rows still held for a full disk die with this process: the last line says so."""
    from trainrig.report.monitor_report import exit_storage_warning

    warning = exit_storage_warning(store.storage_state(), "The monitor is exiting")
    if warning:
        err_console.print(f"[bold red]warning:[/] {warning}", highlight=False, soft_wrap=True)


def _config(hz: float, job: Path | None, name: str | None, gpus: str | None,
            flops_per_token: float | None, peak_tflops: float | None, devices: int | None,
            memory_limit_gib: float | None, nvml_fake: str | None) -> Any:
    from trainrig.monitor.recording import RecordingConfig
    from trainrig.monitor.sampler import check_hz
    from trainrig.monitor.workload import estimate_summary, load_job_input, resolve_workload

    check_hz(hz, "--hz")
    if job is not None and not job.is_file():
        raise TrainrigError("--job", f"{job} is not a file.")
    _check_positive(memory_limit_gib, "--memory-limit-gib", "a positive number of GiB")
    job_spec = load_job_input(str(job) if job else None, "--job")
    workload = _flag_errors(lambda: resolve_workload(
        job=job_spec, flops_per_token=flops_per_token, peak_tflops=peak_tflops, devices=devices))
    return RecordingConfig(hz=hz, name=name, gpus=_gpu_list(gpus), nvml_backend=_backend(nvml_fake),
                           memory_limit_bytes=int(memory_limit_gib * GIB) if memory_limit_gib else None,
                           workload=workload, estimate=estimate_summary(job_spec))


def _default_name(command: list[str] | None, pid: int | None) -> str:
    """The script a command runs (`train.py`), else its program, else `pid N`."""
    if not command:
        return f"pid {pid}"
    scripts = [Path(a).name for a in command if a.endswith(".py")]
    return scripts[0] if scripts else Path(command[0]).name


def _flag_errors(make: Any) -> Any:
    """Name the command-line flag in errors raised for the Python argument."""
    try:
        return make()
    except TrainrigError as error:
        flag = "--" + error.field.replace("_", "-")
        raise TrainrigError(flag, error.message) from None


def _gpu_list(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise TrainrigError("--gpus", f"must be comma-separated GPU indices like 0,1 (got {text!r}).") \
            from None


def _backend(nvml_fake: str | None) -> Any:
    if not nvml_fake:
        return None
    from trainrig.probe.nvml_fake import FakeNvml

    return FakeNvml.from_recording(nvml_fake)


def _follow(supervisor: Any, command: list[str] | None, pid: int | None,
            duration: float | None, live: bool, json_output: bool) -> int:
    """Run or attach, with the live view on a terminal; with --json the job's output goes to
    stderr so that stdout is the JSON alone."""
    show = live and console.is_terminal
    if not show:
        err_console.print("trainrig monitor: recording (no live view)", highlight=False)
        if command:
            return supervisor.run(command, stdout=sys.stderr if json_output else None)
        supervisor.attach(pid, duration_s=duration)
        return 0
    from rich.live import Live

    from trainrig.report.monitor_live import live_renderable

    with Live(console=err_console, refresh_per_second=2, transient=False) as view:
        def refresh(state: Any) -> None:
            view.update(live_renderable(state))

        if command:
            return supervisor.run(command, refresh)
        supervisor.attach(pid, refresh, duration)
        return 0


def _present(store: Any, run_id: int | None, json_output: bool) -> None:
    if run_id is None:
        return
    from trainrig.monitor.analysis import analyze

    report = analyze(store.load(run_id))
    if json_output:
        print_json(report.to_dict())
        return
    from trainrig.report.monitor_report import report_renderables

    for part in report_renderables(report):
        console.print(part)


def register(app: typer.Typer) -> None:
    app.command("monitor", context_settings={"allow_interspersed_args": False})(monitor)
