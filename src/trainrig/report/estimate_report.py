"""Rich rendering of an Estimate (and of what-if variants beside it). Nothing here computes a figure."""

from __future__ import annotations

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trainrig.estimate import Estimate
from trainrig.estimate.result import RESOURCES
from trainrig.report.format import duration_text, layout_text, money_text, na, params_text

__all__ = ["estimate_view", "what_if_table"]

BAR_WIDTH = 28


def estimate_view(est: Estimate) -> Group:
    """Header, memory, step time, throughput and bottleneck, warnings — top to bottom."""
    parts = [_header(est), _memory_table(est), _step_table(est), _throughput_table(est), _bottleneck(est)]
    if est.warnings or est.notes or est.assumptions:
        parts.append(_messages(est))
    return Group(*parts)


def _header(est: Estimate) -> Text:
    c = est.config
    text = Text()
    text.append(f"{c['model']} ({params_text(c['n_params'])} params) on {c['n_gpus']} × {c['gpu']}", style="bold")
    text.append(f"  ({c['n_nodes']} node{'s' if c['n_nodes'] > 1 else ''}, {c['intra_node']}"
                + (f", {c['inter_node']} between nodes" if c["inter_node"] else "") + ")\n")
    text.append(layout_text(c))
    return text


def _bar(fraction: float, style: str) -> Text:
    filled = max(0, min(BAR_WIDTH, round(fraction * BAR_WIDTH)))
    return Text("█" * filled + "·" * (BAR_WIDTH - filled), style=style)


def _memory_table(est: Estimate) -> Table:
    verdict = "[green]fits[/]" if est.fits else "[bold red]does not fit[/]"
    title = (f"Memory per GPU: {est.memory_per_gpu_gib:.1f} of {est.memory_capacity_gib:g} GiB — {verdict}")
    table = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    for _ in range(3):
        table.add_column()
    for part, gib in est.memory_breakdown_gib.items():
        table.add_row(f"  {part}", f"{gib:8.2f} GiB", _bar(gib / est.memory_capacity_gib, "cyan"))
    table.add_row("  peak", f"{est.memory_allocated_gib:8.2f} GiB",
                  f"allocated at the end of the {est.memory_peak_phase}; {est.memory_reserved_gib:.2f} GiB reserved;"
                  f" fits under {est.memory_limit_gib:.1f} GiB")
    if est.memory_paged_gib > 0:
        table.add_row("  paged", f"{est.memory_paged_gib:8.2f} GiB",
                      "optimizer states in unified memory (paged to the host under pressure)")
    if est.fit_message:
        table.add_row("", Text(est.fit_message, style="red"), "")
    return table


def _step_table(est: Estimate) -> Table:
    table = Table(title=f"Step time: {duration_text(est.step_time_s)} (exposed time of each part)",
                  title_justify="left", show_header=False, box=None, pad_edge=False)
    for _ in range(4):
        table.add_column()
    for part, seconds in sorted(est.step_breakdown_s.items(), key=lambda kv: -kv[1]):
        if seconds <= 0:
            continue
        share = seconds / est.step_time_s
        table.add_row(f"  {part}", duration_text(seconds), f"{share:6.1%}", _bar(share, "magenta"))
    return table


def _throughput_table(est: Estimate) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column()
    table.add_column()
    table.add_row("  tokens/s", f"{est.tokens_per_s:,.0f} ({est.tokens_per_s_per_gpu:,.0f} per GPU)")
    table.add_row("  model TFLOP/s per GPU", f"{est.model_tflops_per_gpu:,.1f}  (MFU {est.mfu:.1%} of the"
                  f" {est.mfu_peak} peak, {est.mfu_peak_tflops:,.0f} TFLOP/s)")
    table.add_row("  hardware TFLOP/s per GPU", f"{est.hardware_tflops_per_gpu:,.1f}")
    hint = "" if est.total_time_s else "  (give training.tokens)"
    table.add_row("  total time", duration_text(est.total_time_s) + hint)
    table.add_row("  GPU-hours", na(est.gpu_hours, "{:,.0f}"))
    price = f" at ${est.price_usd_per_gpu_hour:g}/GPU-h" if est.cost_usd else ""
    table.add_row("  cost", money_text(est.cost_usd) + price)
    table.add_row("  host RAM per node", f"{est.host_ram_gb_per_node:,.0f} GB")
    return table


def _bottleneck(est: Estimate) -> Panel:
    ranked = sorted(est.speedup_if_2x.items(), key=lambda kv: -kv[1])
    speedups = "   ".join(f"{name} {value:.2f}×" for name, value in ranked)
    body = Text(est.bottleneck_message + "\n", style="bold")
    body.append("step speed-up if one resource were 2× faster: " + speedups, style="dim")
    return Panel(body, title=f"bottleneck: {est.bottleneck}", title_align="left", border_style="yellow")


def _messages(est: Estimate) -> Text:
    text = Text()
    for warning in est.warnings:
        text.append(f"warning: {warning}\n", style="yellow")
    for note in est.notes:
        text.append(f"note: {note}\n", style="dim")
    for assumption in est.assumptions:
        text.append(f"assumed: {assumption}\n", style="dim")
    return text


def what_if_table(base: Estimate, variants: list[tuple[str, Estimate]]) -> Table:
    """The base and each variant side by side, with the change in step time."""
    table = Table(title="What if", title_justify="left", header_style="bold")
    table.add_column("")
    table.add_column("base", justify="right")
    for label, _ in variants:
        table.add_column(escape(label), justify="right")  # a list value's brackets are not markup
    rows = [
        ("fits", lambda e: "yes" if e.fits else "no"),
        ("memory/GPU", lambda e: f"{e.memory_per_gpu_gib:.1f} GiB"),
        ("step time", lambda e: duration_text(e.step_time_s)),
        ("tokens/s/GPU", lambda e: f"{e.tokens_per_s_per_gpu:,.0f}"),
        ("MFU", lambda e: f"{e.mfu:.1%}"),
        ("total time", lambda e: duration_text(e.total_time_s)),
        ("cost", lambda e: money_text(e.cost_usd)),
        ("bottleneck", lambda e: e.bottleneck),
    ]
    for label, cell in rows:
        table.add_row(label, cell(base), *(cell(v) for _, v in variants))
    table.add_row("vs base", "", *(f"{base.step_time_s / v.step_time_s:.2f}× speed" for _, v in variants))
    return table


def resource_names() -> dict[str, str]:
    return dict(RESOURCES)
