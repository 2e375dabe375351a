"""Rich rendering of a BenchResult: measured beside the estimate of the same scaled job, with the
error of each figure, then the full-size projection. Nothing here computes a figure."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainrig.bench.result import PROJECTION_LABEL, BenchResult
from trainrig.report.format import NA, na

__all__ = ["bench_view"]

# measured key → (row label, format of a value, unit)
ROWS = {
    "step_time_s": ("step time", "{:.4g}", "s"),
    "forward_s": ("  forward (with loss)", "{:.4g}", "s"),
    "backward_s": ("  backward", "{:.4g}", "s"),
    "optimizer_s": ("  optimizer", "{:.4g}", "s"),
    "tokens_per_s": ("tokens/s", "{:,.0f}", ""),
    "peak_allocated_gib": ("peak allocated", "{:.3f}", "GiB"),
    "peak_reserved_gib": ("peak reserved", "{:.3f}", "GiB"),
}


def bench_view(result: BenchResult) -> Group:
    parts: list = [_header(result)]
    if result.oom_message:
        parts.append(Text(result.oom_message, style="bold red"))
    else:
        parts += [_comparison(result), _projection(result)]
    parts += [Text(f"note: {n}", style="dim") for n in result.notes]
    parts += [Text(f"warning: {w}", style="yellow") for w in result.warnings]
    return Group(*parts)


def _header(r: BenchResult) -> Text:
    text = Text()
    where = f"{r.n_gpus} × {r.device_name} ({r.device}, {r.parallel})" if r.n_gpus > 1 else \
        f"{r.device_name} ({r.device})"
    text.append(f"bench {r.model}: {r.n_layers} of {r.n_layers_full} layers on {where}", style="bold")
    text.append(f"\n{r.dtype} · micro-batch {r.micro_batch} · seq {r.seq_len:,} · {r.warmup} warm-up + {r.steps}"
                f" timed steps · {r.params_built:,} params built, {r.trainable_params:,} trainable · torch"
                f" {r.torch_version}")
    if r.measured is not None:
        text.append(f"\nloss {r.measured.loss_first:.3f} → {r.measured.loss_last:.3f}")
    return text


def _titled(title: str, table: Table) -> Group:
    """The title as its own line: a table's title wraps at the table's width."""
    return Group(Text(title, style="bold"), table)


def _comparison(r: BenchResult) -> Group:
    table = Table()
    for name in ("figure", "measured", "estimated", "error"):
        table.add_column(name, justify="left" if name == "figure" else "right")
    for key, (label, fmt, unit) in ROWS.items():
        measured = getattr(r.measured, key)
        estimated = r.estimated.get(key)
        error = r.error_pct.get(key)
        table.add_row(label, _value(measured, fmt, unit), _value(estimated, fmt, unit),
                      NA if error is None else f"{error:+.1f}%")
    gpus = f"{r.n_gpus} × {r.estimated_gpu}" if r.n_gpus > 1 else f"one {r.estimated_gpu}"
    return _titled(f"measured vs estimated for the same {r.n_layers}-layer job on {gpus}", table)


def _projection(r: BenchResult) -> Group:
    table = Table()
    for name in ("figure", "full job, estimated", "corrected"):
        table.add_column(name, justify="left" if name == "figure" else "right")
    for key, corrected in r.projection.items():
        label, fmt, unit = ROWS[key]
        table.add_row(label, _value(r.full_estimate.get(key), fmt, unit), _value(corrected, fmt, unit))
    return _titled(PROJECTION_LABEL, table)


def _value(value: float | None, fmt: str, unit: str) -> str:
    text = na(value, fmt)
    return text if value is None or not unit else f"{text} {unit}"
