"""`trainrig report RUN --html FILE`: one self-contained page; plots over time as inline SVG.

Plots (matplotlib, imported lazily, no CDN): GPU utilization and SM activity, GPU memory, power,
step time with its data wait, host CPU and memory, and the diagnosis on the same time axis (each
finding's evidence window). Without matplotlib the page keeps every table and says how to get
the plots. Renders a RunReport; computes nothing.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from trainrig.report.format import NA, duration_text, na
from trainrig.report.monitor_report import bytes_rate_text, mfu_text, time_text
from trainrig.report.probe_html import MATPLOTLIB_HINT, plots_available
from trainrig.report.svg import inline_svg
from trainrig.units import GIB

__all__ = ["render_html"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
.note{color:#666} .finding{border-left:4px solid #f9a825;padding:0 1em;margin:1em 0}
figure{margin:1em 0} svg{max-width:100%;height:auto}
"""


def render_html(report: Any) -> str:
    run = report.run
    body = [f"<h1>trainrig run {run.id} — {_e(run.name)}</h1>",
            f"<p class=note>{_e(run.status)}, started {_e(time_text(run.started_at))}, "
            f"{_e(duration_text(report.duration_s))} on {_e(run.hostname)}<br>"
            f"<code>{_e(' '.join(run.command or []))}</code></p>"]
    if report.comparison is not None:
        body.append(f"<p><b>vs estimate:</b> {_e(report.comparison.message)}</p>")
    body.append("<h2>Diagnosis</h2>" + _findings(report))
    body.append("<h2>Steps</h2>" + _steps(report))
    plots = _plots(report)
    body.append("<h2>Over time</h2>" + ("".join(plots) if plots is not None
                                        else f"<p class=note>{MATPLOTLIB_HINT}</p>"))
    body.append("<h2>GPUs</h2>" + _gpus(report))
    body.append("<h2>Host</h2>" + _host(report))
    return ("<!doctype html><html><head><meta charset=utf-8>"
            f"<title>trainrig run {run.id}</title><style>{_CSS}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")


def _e(value: Any) -> str:
    return html.escape(NA if value is None else str(value))


def _table(header: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    lines = ["<tr>" + "".join(f"<td class=num>{c}</td>" if i in numeric else f"<td>{c}</td>"
                              for i, c in enumerate(row)) + "</tr>" for row in rows]
    return f"<table><tr>{head}</tr>{''.join(lines)}</table>"


def _findings(report: Any) -> str:
    parts = []
    for f in report.findings:
        advice = "".join(f"<li>{_e(a)}</li>" for a in f.advice)
        rows = [[_e(e.gpu), _e(e.metric), _e(na(e.value, "{:,.4g}")) + " " + _e(e.unit),
                 _e(na(e.threshold, "{:,.4g}")), f"{_e(e.table)}: {_e(', '.join(map(str, e.ids)))}"
                 + (" …" if e.n_samples > len(e.ids) else ""), _e(e.n_samples), _e(e.note)]
                for e in f.evidence]
        parts.append(f"<div class=finding><h3>{_e(f.kind)}</h3><p>{_e(f.message)}</p>"
                     f"<ul>{advice}</ul>"
                     + _table(["GPU", "metric", "value", "threshold", "rows", "n", "note"], rows)
                     + "</div>")
    if not parts:
        parts.append(f"<p>{_e(report.diagnosis[:1].upper() + report.diagnosis[1:])}</p>")
    skipped = [c for c in report.checks if c.status == "not_evaluated"]
    if skipped:
        parts.append("<p class=note>Not evaluated: " + "; ".join(
            f"{_e(c.kind)} ({_e(c.reason)})" for c in skipped) + "</p>")
    return "".join(parts)


def _steps(report: Any) -> str:
    st = report.steps
    dist = st.step_time_s or {}
    rows = [["steps (measured)", f"{st.steps} ({st.measured_steps})"],
            ["step time median / p10 / p90", " / ".join(duration_text(dist.get(k))
                                                        for k in ("median", "p10", "p90"))],
            ["data wait share", na(st.data_wait_share, "{:.1%}")],
            ["tokens/s", na(st.tokens_per_s, "{:,.0f}")],
            ["model TFLOP/s per device", na(st.model_tflops_per_device, "{:,.3g}")],
            ["MFU", mfu_text(st.mfu)], ["devices", str(st.devices)]]
    return _table(["figure", "value"], [[_e(a), _e(b)] for a, b in rows], frozenset({1}))


def _gpus(report: Any) -> str:
    if not report.gpus:
        return f"<p class=note>N/A: {_e(report.nvml_reason or 'no GPU samples')}</p>"
    rows = []
    for g, s in zip(report.gpus, report.gpu_summaries, strict=True):
        rows.append([_e(g.index), _e(g.name), _e(g.catalog_id), _e(s["samples"]),
                     _e(na(s["utilization_gpu_pct_median"], "{:.0f}")),
                     _e(na(s["memory_used_gib_max"], "{:.1f}")), _e(na(s["power_w_max"], "{:.0f}")),
                     _e(na(s["sm_clock_mhz_median"], "{:.0f}")),
                     _e(na(s["sm_active_pct_median"], "{:.0f}"))])
    return _table(["GPU", "name", "catalog", "samples", "util med %", "mem max GiB", "power max W",
                   "SM MHz med", "SM active med %"], rows, frozenset(range(3, 9)))


def _host(report: Any) -> str:
    h = {**report.host, **report.host_summary}
    rows = [["CPU cores", _e(h.get("cpu_count"))],
            ["CPU busy mean", _e(na(h.get("cpu_pct_mean"), "{:.0f}")) + " %"],
            ["job RSS max", _e(na(h.get("job_rss_gib_max"), "{:.2f}")) + " GiB"],
            ["memory limit", _e(na((h.get("memory_limit_bytes") or 0) / GIB or None, "{:.1f}"))
             + f" GiB ({_e(h.get('memory_limit_source'))})"],
            ["loader workers (median)", _e(na(h.get("workers_median"), "{:.0f}"))],
            ["disk read mean", _e(bytes_rate_text(h.get("disk_read_bps_mean")))],
            ["network rx mean", _e(bytes_rate_text(h.get("net_rx_bps_mean")))]]
    return _table(["figure", "value"], rows, frozenset({1}))


# -- plots ---------------------------------------------------------------------------------------------
def _plots(report: Any) -> list[str] | None:
    if not plots_available():
        return None
    import matplotlib

    matplotlib.use("Agg")
    s = report.series
    figures: list[Callable[[Any], bool]] = [
        lambda ax: _gpu_plot(ax, s, "utilization_gpu_pct", "GPU utilization and SM activity (%)",
                             extra="sm_active_pct"),
        lambda ax: _gpu_plot(ax, s, "memory_used_gib", "GPU memory used (GiB)"),
        lambda ax: _gpu_plot(ax, s, "power_w", "GPU power (W)"),
        lambda ax: _steps_plot(ax, s["steps"]),
        lambda ax: _host_plot(ax, s["host"]),
        lambda ax: _diagnosis_plot(ax, report),
    ]
    return [svg for svg in (_figure(draw) for draw in figures) if svg]


def _figure(draw: Callable[[Any], bool]) -> str | None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 3.2))
    try:
        if not draw(ax):
            return None
        ax.set_xlabel("seconds since start")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        return f"<figure>{inline_svg(fig)}</figure>"
    finally:
        plt.close(fig)


def _gpu_plot(ax: Any, series: dict[str, Any], key: str, title: str, extra: str | None = None) -> bool:
    drawn = False
    for gpu, data in series["gpus"].items():
        points = _known(data["t"], data[key])
        if points[0]:
            ax.plot(*points, label=f"GPU {gpu}", linewidth=1)
            drawn = True
        if extra:
            more = _known(data["t"], data[extra])
            if more[0]:
                ax.plot(*more, linestyle="--", linewidth=1, label=f"GPU {gpu} SM active")
    if drawn:
        ax.set_title(title, loc="left")
        ax.legend(fontsize=7, loc="upper right")
    return drawn


def _steps_plot(ax: Any, steps: dict[str, Any]) -> bool:
    if not steps["t"]:
        return False
    ax.plot(steps["t"], steps["step_s"], ".", markersize=3, label="step time")
    waits = _known(steps["t"], steps["data_wait_s"])
    if waits[0]:
        ax.plot(*waits, ".", markersize=3, label="data wait")
    ax.set_title("Step time and data wait (s)", loc="left")
    ax.legend(fontsize=7, loc="upper right")
    return True


def _host_plot(ax: Any, host: dict[str, Any]) -> bool:
    points = _known(host["t"], host["cpu_pct"])
    if not points[0]:
        return False
    ax.plot(*points, linewidth=1, label="host CPU %")
    rss = _known(host["t"], host["job_rss_gib"])
    if rss[0]:
        twin = ax.twinx()
        twin.plot(*rss, color="tab:red", linewidth=1, label="job RSS GiB")
        twin.set_ylabel("job RSS (GiB)")
    ax.set_title("Host CPU (%) and the job's memory", loc="left")
    return True


def _diagnosis_plot(ax: Any, report: Any) -> bool:
    start = report.run.started_at
    rows = []
    for f in report.findings:
        for e in f.evidence:
            if e.t_from is not None and e.t_to is not None:
                rows.append((f.kind, e.t_from - start, max(e.t_to - e.t_from, 0.2)))
    if not rows:
        return False
    kinds = list(dict.fromkeys(r[0] for r in rows))
    for kind, left, width in rows:
        ax.barh(kinds.index(kind), width, left=left, height=0.5, color="tab:orange", alpha=0.7)
    ax.set_yticks(range(len(kinds)), kinds)
    ax.set_title("Diagnosis: when the evidence of each finding was recorded", loc="left")
    return True


def _known(xs: list[float], ys: list[float | None]) -> tuple[list[float], list[float]]:
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
    return [p[0] for p in pairs], [p[1] for p in pairs]
