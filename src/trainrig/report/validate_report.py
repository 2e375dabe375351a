"""Rich rendering of a validation report (measured vs predicted)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainrig.estimate.validation import PRIMARY, CaseScore, ValidationReport

__all__ = ["validation_view"]

SHORT = {"tokens_per_s_per_gpu": "tok/s/GPU", "step_time_s": "step s", "model_tflops_per_gpu": "TFLOP/s",
         "mfu": "MFU", "memory_gib": "mem GiB", "memory_gb": "mem GB", "memory_active_gib": "active GiB",
         "memory_reserved_gib": "reserved GiB"}
NONE = "—"  # a source without that kind of measurement


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
        rows = 0
        for metric in case.measured:
            error = case.error_pct.get(metric)
            style = "red" if error is not None and abs(error) > 25 else ""
            table.add_row(case.id if rows == 0 else "", SHORT.get(metric, metric), f"{case.measured[metric]:,.4g}",
                          f"{case.predicted[metric]:,.4g}", Text(f"{error:+.1f}%", style=style),
                          case.bottleneck if rows == 0 else "")
            rows += 1
        # the verdict row only where it says something: an OOM run, or a run predicted not to fit
        if case.oom or not case.fit_right:
            table.add_row(case.id if rows == 0 else "", "fits", "no (OOM)" if case.oom else "yes",
                          _verdict(case), Text("right" if case.fit_right else "wrong",
                                               style="" if case.fit_right else "red"),
                          case.bottleneck if rows == 0 else "")
    return table


def _verdict(case: CaseScore) -> str:
    return f"{'yes' if case.fits else 'no'}, {case.memory_per_gpu_gib:,.1f} GiB"


def _summary_table(report: ValidationReport) -> Table:
    table = Table(title=f"Error by source: {SHORT[PRIMARY]} and peak memory (mean absolute %), fit verdicts right",
                  title_justify="left", header_style="bold")
    table.add_column("source")
    table.add_column("cases", justify="right")
    table.add_column("MAPE", justify="right")
    table.add_column("memory", justify="right")
    table.add_column("fits", justify="right")
    throughput_cases: dict[str, int] = {}
    for case in report.cases:
        if PRIMARY in case.error_pct:
            throughput_cases[case.family] = throughput_cases.get(case.family, 0) + 1
    memory = report.memory_mape_by_source or {}
    fit = report.fit_by_source or {}
    # every family a case belongs to, in the order the cases came
    for family in dict.fromkeys(c.family for c in report.cases):
        mape = report.mape_by_source.get(family)
        right, total = fit.get(family, (0, 0))
        table.add_row(family, str(total or throughput_cases.get(family, 0)), _pct(mape), _pct(memory.get(family)),
                      Text(f"{right}/{total}", style="" if right == total else "red") if total else NONE)
    mean = Text(_pct(report.mape), style="bold")
    memory_mean = Text(_pct(report.memory_mape), style="bold")
    verdicts = Text(f"{report.fit_right}/{report.fit_total}", style="bold") if report.fit_total else NONE
    table.add_row(Text("mean over sources", style="bold"), str(len(report.cases)), mean, memory_mean, verdicts)
    worst = report.worst[0] if report.worst else None
    if worst:
        table.add_row("worst case", worst.id, f"{worst.error_pct[PRIMARY]:+.1f}%", "", "")
    return table


def _pct(value: float | None) -> str:
    return NONE if value is None or value != value else f"{value:.1f}%"
