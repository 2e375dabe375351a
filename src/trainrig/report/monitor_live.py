"""The live view of `trainrig monitor`: renders a LiveState (GPUs, host, steps, findings so far)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from trainrig.monitor.live import LiveState
from trainrig.probe.nvml import SLOWDOWN_REASONS, decode_clock_event_reasons
from trainrig.report.format import NA, duration_text, na
from trainrig.report.monitor_report import bytes_rate_text, mfu_text, storage_warning
from trainrig.units import GIB

__all__ = ["live_renderable"]



def live_renderable(state: LiveState) -> RenderableType:
    head = Text(f"trainrig monitor — run {state.run_id} — {duration_text(state.elapsed_s)}  ",
                style="bold")
    head.append(" ".join(state.command or [])[:100], style="dim")
    parts: list[RenderableType] = [head, _steps(state.step_figures)]
    warning = storage_warning(state.storage)
    if warning:
        parts.insert(0, Text(warning, style="bold white on red"))
    parts.append(_gpus(state) if state.gpu_rows else
                 Text(f"GPUs: N/A ({state.nvml_reason or 'no samples yet'})", style="dim"))
    parts.append(_host(state.host_row, state.host))
    if state.findings:
        parts.append(Text("so far: " + "; ".join(f"[{f.kind}] {f.message}" for f in state.findings),
                          style="yellow"))
    if state.sampler_errors:
        parts.append(Text(f"sampler errors: {state.sampler_errors}", style="red"))
    return Group(*parts)


def _steps(f: dict[str, Any]) -> Text:
    return Text(f"steps {f.get('steps') or 0:.0f}   last {duration_text(f.get('step_s'))}   "
                f"data wait {na(f.get('data_wait_share'), '{:.0%}')}   "
                f"tokens/s {na(f.get('tokens_per_s'), '{:,.0f}')}   MFU {mfu_text(f.get('mfu'))}")


def _gpus(state: LiveState) -> Table:
    names = {g["index"]: g.get("name") for g in state.gpus}
    table = Table(box=None, pad_edge=False)
    for header in ("GPU", "util %", "mem GiB", "power W", "SM MHz", "temp °C", "PCIe rx/tx",
                   "SM act %", "throttle"):
        table.add_column(header, justify="left" if header in ("GPU", "throttle") else "right")
    for row in state.gpu_rows:
        table.add_row(f"{row['gpu']} {names.get(row['gpu']) or ''}".strip(),
                      na(row["utilization_gpu_pct"], "{:.0f}"),
                      _memory(row), na(row["power_w"], "{:.0f}"), na(row["sm_clock_mhz"], "{:.0f}"),
                      na(row["temperature_c"], "{:.0f}"), _pcie(row),
                      na(row["sm_active_pct"], "{:.0f}"), _throttle(row["clock_event_mask"]))
    return table


def _memory(row: dict[str, Any]) -> str:
    used, total = row["memory_used_bytes"], row["memory_total_bytes"]
    if used is None:
        return NA
    return f"{used / GIB:.1f}" + (f"/{total / GIB:.0f}" if total else "")


def _pcie(row: dict[str, Any]) -> str:
    rx, tx = row["pcie_rx_kbs"], row["pcie_tx_kbs"]
    return f"{bytes_rate_text(None if rx is None else rx * 1e3)}/" \
           f"{bytes_rate_text(None if tx is None else tx * 1e3)}"


def _throttle(mask: int | None) -> str:
    if mask is None:
        return NA
    reasons = [r for r in decode_clock_event_reasons(int(mask)) if r in SLOWDOWN_REASONS]
    return ", ".join(reasons) or "—"


def _host(row: dict[str, Any] | None, host: dict[str, Any]) -> Text:
    if row is None:
        return Text("host: no sample yet", style="dim")
    cores = row.get("cpu_per_core_pct") or []
    busy = sum(1 for c in cores if c is not None and c >= 90)
    return Text(
        f"host CPU {na(row['cpu_pct'], '{:.0f}%')} ({busy}/{len(cores)} cores ≥ 90%)   "
        f"iowait {na(row['iowait_pct'], '{:.0f}%')}   "
        f"RAM {na(_gib(row['ram_used_bytes']), '{:.1f}')}/"
        f"{na(_gib(host.get('ram_total_bytes')), '{:.0f}')} GiB   "
        f"job CPU {na(row['job_cpu_pct'], '{:.0f}%')} RSS {na(_gib(row['job_rss_bytes']), '{:.2f} GiB')}  "
        f"workers {na(row['workers'], '{:.0f}')}   "
        f"disk r/w {bytes_rate_text(row['disk_read_bps'])}/{bytes_rate_text(row['disk_write_bps'])}   "
        f"net rx/tx {bytes_rate_text(row['net_rx_bps'])}/{bytes_rate_text(row['net_tx_bps'])}")


def _gib(value: float | None) -> float | None:
    return None if value is None else value / GIB
