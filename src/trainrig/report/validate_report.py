"""Rich rendering of a validation report (measured vs predicted)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainrig.estimate.validation import PRIMARY, ValidationReport

__all__ = ["validation_view"]

SHORT = {"tokens_per_s_per_gpu": "tok/s/GPU", "step_time_s": "step s", "model_tflops_per_gpu": "TFLOP/s",
         "mfu": "MFU", "memory_gib": "mem GiB"}


def validation_view(report: ValidationReport, show_cases: bool = True) -> Group:
    parts = []
    if show_cases:
        parts.append(_cases_table(report))
    parts.append(_summary_table(report))
    return Group(*parts)


def _cases_table(report: ValidationReport) -> Table:
    table = Table(title="Measured vs predicted", title_justify="left", header_style="bold")
    for column in ("case", "metric", "measured", "predicted", "error", "binds"):
        table.add_column(column, justify="left" if column in ("case", "metric", "binds") else "right")
    for case in report.cases:
        for i, metric in enumerate(case.measured):
            error = case.error_pct.get(metric)
            style = "red" if error is not None and abs(error) > 25 else ""
            table.add_row(case.id if i == 0 else "", SHORT.get(metric, metric), f"{case.measured[metric]:,.4g}",
                          f"{case.predicted[metric]:,.4g}", Text(f"{error:+.1f}%", style=style),
                          case.bottleneck if i == 0 else "")
    return table


def _summary_table(report: ValidationReport) -> Table:
    table = Table(title=f"Error of {SHORT[PRIMARY]} by source (mean absolute %)", title_justify="left",
                  header_style="bold")
    table.add_column("source")
    table.add_column("cases", justify="right")
    table.add_column("MAPE", justify="right")
    counts: dict[str, int] = {}
    for case in report.cases:
        if PRIMARY in case.error_pct:
            counts[case.family] = counts.get(case.family, 0) + 1
    for family, mape in report.mape_by_source.items():
        table.add_row(family, str(counts.get(family, 0)), f"{mape:.1f}%")
    mean = Text(f"{report.mape:.1f}%", style="bold")
    table.add_row(Text("mean over sources", style="bold"), str(sum(counts.values())), mean)
    worst = report.worst[0] if report.worst else None
    if worst:
        table.add_row("worst case", worst.id, f"{worst.error_pct[PRIMARY]:+.1f}%")
    if report.memory_mape is not None:
        table.add_row("memory (where measured)", "", f"{report.memory_mape:.1f}%")
    return table
