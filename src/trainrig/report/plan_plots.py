"""Plots of a PlanResult: the time–cost plane with its Pareto front and the chosen plans marked, and the
step-time breakdown of the plans. matplotlib is imported lazily; nothing here computes a figure."""

from __future__ import annotations

import html
import io
from typing import Any

from trainrig.errors import TrainrigError
from trainrig.plan.result import PlanResult
from trainrig.report.plan_report import hardware_text

__all__ = ["plan_plot", "plan_figure"]

SECONDS_PER_DAY = 86400.0
PART_COLORS = {"compute": "#4c72b0", "launch_overhead": "#8c8c8c", "tp_comm": "#dd8452", "cp_comm": "#937860",
               "ep_comm": "#da8bc3", "pp_comm": "#8172b3", "pp_bubble": "#ccb974", "dp_comm": "#c44e52",
               "data_loading": "#64b5cd", "host_transfer": "#55a868", "checkpoint": "#a1c9f4",
               "cpu_optimizer": "#8de5a1", "other": "#cfcfcf"}


def plan_plot(result: PlanResult, suffix: str) -> bytes | str:
    """The figure as PNG bytes (`.png`) or a self-contained HTML page with the SVG inline (`.html`)."""
    figure = plan_figure(result)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png" if suffix == ".png" else "svg", dpi=120, bbox_inches="tight")
    _pyplot().close(figure)
    if suffix == ".png":
        return buffer.getvalue()
    return _html_page(result, buffer.getvalue().decode("utf-8"))


def plan_figure(result: PlanResult) -> Any:
    """A matplotlib Figure: the time–cost plane (left) and the plans' step breakdowns (right)."""
    plt = _pyplot()
    figure, (plane, steps) = plt.subplots(1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [1.2, 1]})
    _draw_plane(plane, result)
    _draw_steps(steps, result)
    figure.tight_layout()
    return figure


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TrainrigError("plot", "needs matplotlib, which is not installed: pip install 'trainrig[plot]'.") from None
    return plt


def _draw_plane(axes, result: PlanResult) -> None:
    points = result.points
    others = [p for p in points if not p.on_front]
    front = sorted((p for p in points if p.on_front), key=lambda p: p.total_time_s)
    axes.scatter([p.total_time_s / SECONDS_PER_DAY for p in others], [p.cost_usd for p in others], s=12,
                 color="#b0b0b0", label="best of each GPU type × count")
    axes.plot([p.total_time_s / SECONDS_PER_DAY for p in front], [p.cost_usd for p in front], "o-",
              color="#4c72b0", markersize=4, label="Pareto front (faster or cheaper than all others)")
    chosen = [p for p in result.plans if p.estimate.cost_usd is not None and p.estimate.total_time_s is not None]
    axes.scatter([p.estimate.total_time_s / SECONDS_PER_DAY for p in chosen], [p.estimate.cost_usd for p in chosen],
                 s=90, facecolors="none", edgecolors="#c44e52", linewidths=2, label="chosen plans", zorder=3)
    for plan in chosen:
        axes.annotate(f"#{plan.rank}", (plan.estimate.total_time_s / SECONDS_PER_DAY, plan.estimate.cost_usd),
                      textcoords="offset points", xytext=(6, 6), color="#c44e52")
    _draw_constraints(axes, result.constraints)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("total training time (days)")
    axes.set_ylabel("cost (USD, on-demand)")
    axes.set_title("Time vs cost (configurations with a known price)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8, loc="upper right")


def _draw_constraints(axes, constraints: dict) -> None:
    if constraints.get("deadline_days") is not None:
        axes.axvline(constraints["deadline_days"], color="#555555", linestyle="--", linewidth=1)
        axes.annotate("deadline", (constraints["deadline_days"], 1), xycoords=("data", "axes fraction"),
                      xytext=(3, -12), textcoords="offset points", fontsize=8)
    if constraints.get("budget_usd") is not None:
        axes.axhline(constraints["budget_usd"], color="#555555", linestyle=":", linewidth=1)
        axes.annotate("budget", (0, constraints["budget_usd"]), xycoords=("axes fraction", "data"),
                      xytext=(3, 3), textcoords="offset points", fontsize=8)


def _draw_steps(axes, result: PlanResult) -> None:
    plans = list(reversed(result.plans))
    labels = [f"#{p.rank} {p.n_gpus} × {p.gpu}\n{p.offer.provider + ' ' + p.offer.instance if p.offer else 'no offer'}"
              for p in plans]
    lefts = [0.0] * len(plans)
    for part, color in PART_COLORS.items():
        widths = [p.estimate.step_breakdown_s.get(part, 0.0) for p in plans]
        if any(w > 0 for w in widths):
            axes.barh(labels, widths, left=lefts, color=color, label=part)
            lefts = [left + w for left, w in zip(lefts, widths, strict=True)]
    axes.set_xlabel("seconds per optimizer step (exposed time of each part)")
    axes.set_title("Step time of the plans")
    axes.tick_params(axis="y", labelsize=8)
    axes.legend(fontsize=7, loc="lower right")


def _html_page(result: PlanResult, svg: str) -> str:
    svg = svg[svg.index("<svg"):]
    rows = "".join(
        f"<tr><td>{p.rank}</td><td>{html.escape(hardware_text(p))}</td>"
        f"<td>{_days(p.estimate.total_time_s)}</td><td>{_usd(p.estimate.cost_usd)}</td>"
        f"<td>{p.estimate.mfu:.1%}</td><td>{html.escape(p.estimate.bottleneck)}</td></tr>" for p in result.plans)
    message = f"<p class='miss'>{html.escape(result.message)}</p>" if result.message else ""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>trainrig plan</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px}.miss{color:#c44e52;font-weight:bold}</style></head><body>"
        f"<h1>trainrig plan — objective: {html.escape(result.objective)}</h1>{message}"
        f"<p>{result.n_configurations_evaluated:,} configurations evaluated, {result.n_configurations_fitting:,} fit,"
        f" {result.n_configurations_feasible:,} meet the constraints.</p>{svg}"
        "<table><tr><th>#</th><th>hardware</th><th>total time</th><th>cost</th><th>MFU</th><th>bottleneck</th></tr>"
        f"{rows}</table></body></html>")


def _days(seconds: float | None) -> str:
    return "N/A" if seconds is None else f"{seconds / SECONDS_PER_DAY:.3g} days"


def _usd(value: float | None) -> str:
    return "N/A" if value is None else f"${value:,.0f}"
