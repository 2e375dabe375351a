"""Rich tables for `trainrig runs` and `trainrig report`: renders a RunReport, computes nothing."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trainrig.report.format import NA, duration_text, na
from trainrig.units import GIB

__all__ = ["runs_table", "report_renderables", "findings_renderable", "bytes_rate_text",
           "time_text", "mfu_text", "storage_warning"]


def exit_storage_warning(storage: dict[str, Any], who: str) -> str | None:
    """What a process says as it exits with rows still held for a full disk (they die with it);
    None when nothing is held. `who`: the subject of the sentence ("The monitor is exiting")."""
    if not storage.get("full_now"):
        return None
    lost = "" if storage["memory_only"] else f" {who}: {storage['pending_rows']} rows are lost."
    return f"{storage_warning(storage)}{lost}"


def storage_warning(storage: dict[str, Any]) -> str | None:
    """One loud line when the disk refused the monitor's writes (`Store.storage_state()`)."""
    if not storage:
        return None
    where = storage.get("path") or "the monitor database"
    if storage.get("memory_only"):
        return (f"DISK FULL: {where} could not be opened; this run is recorded in memory only "
                "and is lost when the monitor exits.")
    dropped = storage.get("dropped_rows") or 0
    lost = f" {dropped} oldest rows dropped (memory cap {storage.get('max_pending_rows')})." \
        if dropped else ""
    if storage.get("full_now"):
        return (f"DISK FULL: {storage.get('pending_rows', 0)} rows held in memory, not yet written "
                f"to {where}; they are written when space returns.{lost}")
    return f"The disk was full during the run; every row kept in memory was written since.{lost}"



def time_text(unix_s: float | None) -> str:
    if unix_s is None:
        return NA
    return dt.datetime.fromtimestamp(unix_s).strftime("%Y-%m-%d %H:%M:%S")


def mfu_text(mfu: float | None) -> str:
    return NA if mfu is None else f"{mfu:.1%}"


def bytes_rate_text(bps: float | None) -> str:
    if bps is None:
        return NA
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.1f} {unit}"
    return f"{bps:.0f} B/s"


def runs_table(runs: list[dict[str, Any]]) -> Table:
    table = Table(title="Monitored runs", title_justify="left")
    for header in ("run", "name", "status", "started", "duration", "steps", "step (median)",
                   "tokens/s", "MFU", "findings"):
        table.add_column(header, justify="right" if header in ("run", "steps", "tokens/s", "MFU")
                         else "left")
    for run in runs:
        steps = run.get("steps") or {}
        step_time = (steps.get("step_time_s") or {}).get("median")
        table.add_row(str(run["id"]), run.get("name") or NA,
                      _status(run["status"], run.get("exit_code")),
                      time_text(run["started_at"]), duration_text(run.get("duration_s")),
                      str(steps.get("steps", 0)), duration_text(step_time),
                      na(steps.get("tokens_per_s"), "{:,.0f}"), mfu_text(steps.get("mfu")),
                      ", ".join(f["kind"] for f in run.get("findings", [])) or "—")
    return table


def _status(status: str, exit_code: int | None = None) -> str:
    """`failed (exit 3)`, `killed by SIGKILL (exit 137)`, `lost` (the monitor vanished)…"""
    color = {"finished": "green", "running": "cyan", "failed": "red", "killed": "red",
             "lost": "magenta", "ended": "white", "detached": "cyan"}
    text = status if exit_code in (None, 0) else f"{status} (exit {exit_code})"
    return f"[{color.get(status.split()[0], 'white')}]{text}[/]"


def report_renderables(report: Any) -> list[RenderableType]:
    """The whole report of one run, as rich renderables, top to bottom."""
    parts: list[RenderableType] = [_header(report), _steps_table(report)]
    warning = storage_warning(getattr(report, "storage", {}))
    if warning:
        parts.insert(0, Panel(warning, title="storage", border_style="bold red", title_align="left"))
    if report.comparison is not None:
        parts.append(Text(f"vs estimate: {report.comparison.message}", style="bold"))
    parts.append(_gpu_table(report) if report.gpus else
                 Text(f"GPUs: N/A ({report.nvml_reason or 'no GPU samples'})", style="dim"))
    parts.append(_host_table(report))
    parts.append(findings_renderable(report.findings, report.diagnosis))
    skipped = [c for c in report.checks if c.status == "not_evaluated"]
    if skipped:
        lines = "\n".join(f"{c.kind}: {c.reason}" for c in skipped)
        parts.append(Panel(lines, title="not evaluated", border_style="dim", title_align="left"))
    return parts


def _header(report: Any) -> Text:
    run = report.run
    command = " ".join(run.command or []) or NA
    text = Text(f"run {run.id}", style="bold")
    text.append(f"  {run.name or ''}  {run.status}  started {time_text(run.started_at)}  "
                f"duration {duration_text(report.duration_s)}  on {run.hostname or NA}\n")
    text.append(f"command: {command}\n", style="dim")
    s = report.samples
    text.append(f"{s['gpu']} GPU samples, {s['host']} host samples, {s['steps']} steps", style="dim")
    errors = report.sampler.get("errors")
    if errors:
        text.append(f"; sampler errors: {errors} (last: {report.sampler.get('last_error')})",
                    style="yellow")
    return text


def _steps_table(report: Any) -> Table:
    st = report.steps
    table = Table(title="Steps", title_justify="left", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    dist = st.step_time_s or {}
    table.add_row("steps (measured after warm-up)", f"{st.steps} ({st.measured_steps})")
    table.add_row("step time median / p90", f"{duration_text(dist.get('median'))} / "
                                            f"{duration_text(dist.get('p90'))}")
    table.add_row("data wait share", na(st.data_wait_share, "{:.1%}"))
    table.add_row("tokens/s", na(st.tokens_per_s, "{:,.0f}"))
    table.add_row("model TFLOP/s per device", na(st.model_tflops_per_device, "{:,.3g}"))
    table.add_row("MFU", mfu_text(st.mfu) + (f" of {st.peak_tflops_per_device:g} TFLOP/s"
                                             if st.peak_tflops_per_device else ""))
    table.add_row("devices", str(st.devices))
    return table


def _gpu_table(report: Any) -> Table:
    table = Table(title="GPUs", title_justify="left")
    for header in ("GPU", "name", "util med %", "mem max GiB", "power mean/max W", "SM MHz med",
                   "temp max °C", "SM active med %"):
        table.add_column(header, justify="left" if header in ("GPU", "name") else "right")
    for info, s in zip(report.gpus, report.gpu_summaries, strict=True):
        total = f" / {info.memory_total_bytes / GIB:.0f}" if info.memory_total_bytes else ""
        table.add_row(str(info.index), info.name or NA, na(s["utilization_gpu_pct_median"], "{:.0f}"),
                      na(s["memory_used_gib_max"], "{:.1f}") + total,
                      f"{na(s['power_w_mean'], '{:.0f}')} / {na(s['power_w_max'], '{:.0f}')}",
                      na(s["sm_clock_mhz_median"], "{:.0f}"), na(s["temperature_c_max"], "{:.0f}"),
                      na(s["sm_active_pct_median"], "{:.0f}"))
    return table


def _host_table(report: Any) -> Table:
    h = {**report.host, **report.host_summary}
    table = Table(title="Host", title_justify="left", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("CPU cores", str(h.get("cpu_count") or NA))
    table.add_row("CPU busy mean / iowait", f"{na(h.get('cpu_pct_mean'), '{:.0f}')}% / "
                                            f"{na(h.get('iowait_pct_mean'), '{:.1f}')}%")
    table.add_row("job CPU mean (% of one core)", na(h.get("job_cpu_pct_mean"), "{:.0f}"))
    table.add_row("loader workers (median)", na(h.get("workers_median"), "{:.0f}"))
    limit = h.get("memory_limit_bytes")
    table.add_row("job RSS max / limit", f"{na(h.get('job_rss_gib_max'), '{:.2f}')} / "
                                         f"{na(limit / GIB if limit else None, '{:.1f}')} GiB")
    table.add_row("disk read / write mean", f"{bytes_rate_text(h.get('disk_read_bps_mean'))} / "
                                            f"{bytes_rate_text(h.get('disk_write_bps_mean'))}")
    table.add_row("network rx / tx mean", f"{bytes_rate_text(h.get('net_rx_bps_mean'))} / "
                                          f"{bytes_rate_text(h.get('net_tx_bps_mean'))}")
    return table


def findings_renderable(findings: list[Any], diagnosis: str) -> RenderableType:
    if not findings:
        style = "green" if diagnosis.startswith("nothing holds") else "yellow"
        return Text(f"Diagnosis: {diagnosis}", style=style)
    panels = []
    for f in findings:
        body = Text(f.message + "\n", style="bold")
        for advice in f.advice:
            body.append(f"→ {advice}\n")
        for e in f.evidence:
            where = f"GPU {e.gpu} " if e.gpu is not None else ""
            ids = ", ".join(map(str, e.ids[:8])) + (" …" if e.n_samples > 8 else "")
            body.append(f"  evidence: {where}{e.metric} = {na(e.value, '{:,.3g}')} {e.unit} "
                        f"(threshold {na(e.threshold, '{:,.3g}')}) over {e.n_samples} "
                        f"{e.table} [{ids}]" + (f" — {e.note}" if e.note else "") + "\n",
                        style="dim")
        panels.append(Panel(body, title=f.kind, title_align="left", border_style="yellow"))
    return Group(*panels)
