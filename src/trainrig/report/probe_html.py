"""`trainrig probe --html FILE`: one self-contained page, plots as inline SVG (matplotlib, lazy).

Without matplotlib the page still has every table and says how to get the plots.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from trainrig.probe.results import Check, ProbeResult
from trainrig.report.format import NA, na
from trainrig.report.probe_report import bytes_text, rate_text
from trainrig.report.svg import inline_svg

__all__ = ["render_html", "plots_available", "MATPLOTLIB_HINT"]

MATPLOTLIB_HINT = "plots need matplotlib: pip install matplotlib"
_COLORS = {"OK": "#2e7d32", "LOW": "#f9a825", "FAIL": "#c62828", "INFO": "#757575"}
_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
.v{font-weight:bold;color:#fff;padding:2px 6px;border-radius:3px} .note{color:#666}
figure{margin:1em 0} svg{max-width:100%;height:auto}
"""


def plots_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def render_html(result: ProbeResult) -> str:
    """The whole report as one HTML document."""
    body = [f"<h1>trainrig probe — {html.escape(result.system.hostname)}</h1>",
            f"<p class=note>{html.escape(result.measured_at)}, trainrig "
            f"{html.escape(result.trainrig_version)}, {'quick' if result.quick else 'full'} run "
            f"in {result.duration_s:.1f} s</p>"]
    body += [f"<p class=note>{html.escape(n)}</p>" for n in result.notes]
    body.append("<h2>Health</h2>" + _health(result.checks))
    plots = _plots(result)
    body.append("<h2>Plots</h2>" + ("".join(plots) if plots is not None
                                    else f"<p class=note>{MATPLOTLIB_HINT}</p>"))
    body.append("<h2>Machine</h2>" + _machine(result))
    body.append("<h2>Benchmarks</h2>" + _benchmarks(result))
    return ("<!doctype html><html><head><meta charset=utf-8><title>trainrig probe</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")


def _table(header: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    lines = []
    for row in rows:
        cells = "".join(
            f"<td class=num>{cell}</td>" if i in numeric else f"<td>{cell}</td>"
            for i, cell in enumerate(row))
        lines.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(lines)}</table>"


def _e(value: Any) -> str:
    return html.escape(NA if value is None else str(value))


def _health(checks: list[Check]) -> str:
    rows = []
    for c in checks:
        badge = f"<span class=v style='background:{_COLORS[c.verdict]}'>{c.verdict}</span>"
        advice = " — ".join(x for x in (c.cause, c.action) if x)
        rows.append([_e(c.component), _e(c.name), _e(na(c.measured, "{:,.2f}")) + " "
                     + _e(c.unit or ""), _e(na(c.spec, "{:,.2f}")), _e(na(c.expected, "{:,.2f}")),
                     badge, _e(advice), _e(c.source or "")])
    return _table(["where", "figure", "measured", "spec", "expected", "verdict",
                   "likely cause — action", "reference"], rows, {2, 3, 4})


def _machine(result: ProbeResult) -> str:
    s = result.system
    rows = [["CPU", _e(f"{s.cpu.model} — {s.cpu.sockets} socket(s), {s.cpu.cores_physical} "
                       f"cores, {s.cpu.threads_logical} threads, {s.cpu.numa_nodes} NUMA")],
            ["RAM", _e(bytes_text(s.memory.total_bytes))]]
    rows += [["disk", _e(f"{d.mountpoint} {d.device} {d.fstype} {d.kind}, "
                         f"{bytes_text(d.free_bytes)} free")] for d in s.disks]
    rows += [["NIC", _e(f"{n.name} {n.kind} {n.speed_mbps or NA} Mb/s")] for n in s.nics]
    rows += [[f"GPU{g.index}", _e(f"{g.name} → {g.catalog_id or 'not in catalog'}; "
                                  f"PCIe Gen{g.pcie_gen_current} x{g.pcie_width_current} of "
                                  f"Gen{g.pcie_gen_max} x{g.pcie_width_max}; "
                                  f"{g.power_limit_w} W limit; slowdown "
                                  f"{', '.join(g.clock_event_reasons or []) or 'none'}")]
             for g in result.gpus]
    if not result.gpus:
        rows.append(["GPU", _e(f"none found ({result.nvml.reason})")])
    return _table(["part", "detected"], rows)


def _benchmarks(result: ProbeResult) -> str:
    b, parts = result.benchmarks, []
    for gemm in b.gemm:
        rows = [[_e(p.precision), _e(na(p.best_tflops)), _e(p.best_shape), _e(na(p.peak_tflops)),
                 _e(p.skipped or "")] for p in gemm.precisions]
        parts.append(f"<h3>GEMM {_e(gemm.device)}</h3>"
                     + _table(["precision", "best TFLOP/s", "shape", "peak", "note"], rows, {1, 3})
                     + f"<p class=note>{_e(gemm.method)}</p>")
    if b.cpu:
        parts.append("<h3>CPU data loading</h3>" + _table(
            ["work", "one core", f"{b.cpu.processes} processes"],
            [["tokenize", _e(rate_text(b.cpu.tokenize_tokens_per_s_per_core)),
              _e(rate_text(b.cpu.tokenize_tokens_per_s_all_cores))],
             ["collate", _e(rate_text(b.cpu.collate_tokens_per_s_per_core)),
              _e(rate_text(b.cpu.collate_tokens_per_s_all_cores))]], {1, 2})
            + f"<p class=note>{_e(b.cpu.tokenizer)}. {_e(b.cpu.method)}</p>")
    if b.hostmem:
        parts.append("<h3>Host memory</h3>" + _table(
            ["one core GB/s", "all cores GB/s"],
            [[_e(na(b.hostmem.copy_gbs_one_core)), _e(na(b.hostmem.copy_gbs_all_cores))]], {0, 1})
            + f"<p class=note>{_e(b.hostmem.method)}</p>")
    if b.storage:
        s = b.storage
        parts.append("<h3>Storage</h3>" + _table(
            ["path", "read GB/s", "write GB/s"],
            [[_e(s.path), _e(na(s.read_gbs, "{:.2f}")), _e(na(s.write_gbs, "{:.2f}"))]], {1, 2})
            + f"<p class=note>read: {_e(s.read_method)}; write: {_e(s.write_method)}</p>")
    for p in b.pcie:
        parts.append(f"<h3>PCIe GPU{p.gpu_index}</h3>" + _table(
            ["h2d pinned", "d2h pinned", "h2d pageable", "d2h pageable", "both"],
            [[_e(na(v)) for v in (p.h2d_pinned_gbs, p.d2h_pinned_gbs, p.h2d_pageable_gbs,
                                  p.d2h_pageable_gbs, p.bidirectional_pinned_gbs)]],
            {0, 1, 2, 3, 4}) + f"<p class=note>{_e(p.method)}</p>")
    sections = [[_e(s.name), _e(s.status), _e(f"{s.duration_s:.1f}"), _e(s.reason or "")]
                for s in result.sections]
    parts.append("<h3>Sections</h3>" + _table(["section", "status", "s", "why"], sections, {2}))
    return "".join(parts)


# -- plots ---------------------------------------------------------------------------------------
def _plots(result: ProbeResult) -> list[str] | None:
    if not plots_available():
        return None
    import matplotlib

    matplotlib.use("Agg")
    figures: list[Callable[[Any], bool]] = [
        lambda ax: _plot_health(ax, result), lambda ax: _plot_gemm(ax, result),
        lambda ax: _plot_collectives(ax, result), lambda ax: _plot_cpu(ax, result)]
    return [svg for draw in figures if (svg := _figure(draw))]


def _figure(draw: Callable[[Any], bool]) -> str | None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.6))
    try:
        if not draw(ax):
            return None
        fig.tight_layout()
        return f"<figure>{inline_svg(fig)}</figure>"
    finally:
        plt.close(fig)


def _plot_health(ax: Any, result: ProbeResult) -> bool:
    judged = [c for c in result.checks if c.ratio is not None]
    if not judged:
        return False
    labels = [f"{c.component} {c.name}" for c in judged]
    ax.barh(labels, [c.ratio for c in judged], color=[_COLORS[c.verdict] for c in judged])
    ax.axvline(1.0, color="#333", linewidth=1)
    ax.set_xlabel("measured / what such hardware normally reaches")
    ax.set_title("Health")
    ax.invert_yaxis()
    return True


def _plot_gemm(ax: Any, result: ProbeResult) -> bool:
    drawn = False
    for gemm in result.benchmarks.gemm[:1]:
        for p in gemm.precisions:
            if p.points:
                ax.plot(range(len(p.points)), [pt.tflops for pt in p.points], marker="o",
                        label=p.precision)
                ticks = [f"{pt.m}×{pt.n}×{pt.k}" for pt in p.points]
                drawn = True
        if drawn:
            ax.set_xticks(range(len(ticks)), ticks, rotation=30, ha="right", fontsize=7)
            ax.set_ylabel("TFLOP/s")
            ax.set_title(f"GEMM by shape on {gemm.device}")
            ax.legend(fontsize=8)
    return drawn


def _plot_collectives(ax: Any, result: ProbeResult) -> bool:
    c = result.benchmarks.collectives
    if c is None or not any(op.points for op in c.ops):
        return False
    for op in c.ops:
        if op.points:
            ax.plot([p.size_bytes for p in op.points], [p.busbw_gbs for p in op.points],
                    marker="o", label=op.op)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth GB/s")
    ax.set_title(f"Collectives ({c.backend}, {c.world_size} ranks)")
    ax.legend(fontsize=8)
    return True


def _plot_cpu(ax: Any, result: ProbeResult) -> bool:
    cpu = result.benchmarks.cpu
    if cpu is None:
        return False
    labels = ["tokenize 1 core", f"tokenize {cpu.processes}", "collate 1 core",
              f"collate {cpu.processes}"]
    values = [cpu.tokenize_tokens_per_s_per_core, cpu.tokenize_tokens_per_s_all_cores,
              cpu.collate_tokens_per_s_per_core, cpu.collate_tokens_per_s_all_cores]
    ax.bar(labels, values, color="#1565c0")
    ax.set_yscale("log")
    ax.set_ylabel("tokens/s")
    ax.set_title("CPU data loading")
    return True
