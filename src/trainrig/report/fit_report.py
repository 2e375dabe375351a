"""Rich rendering of a FitResult (`trainrig fit`). Nothing here computes a figure."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainrig.fit_answers import FitAnswer, FitResult, GpuTypeFit
from trainrig.report.format import NA, duration_text, layout_text, money_text, na

__all__ = ["fit_view"]


def fit_view(result: FitResult) -> Group:
    """The job as given, the three limits, the cheapest GPU types, then what fits nowhere and notes."""
    parts = [_header(result), _limits_table(result), _cheapest_table(result)]
    apart = _apart(result)
    if apart.plain:
        parts.append(apart)
    parts.append(_notes(result))
    return Group(*parts)


def _header(result: FitResult) -> Text:
    c = result.config
    text = Text()
    text.append(f"{result.model} on {result.n_gpus} × {result.gpu}", style="bold")
    text.append(f"\n{layout_text(c)}\n")
    verdict = "[green]fits[/]" if result.fits else "[bold red]does not fit[/]"
    text.append_text(Text.from_markup(f"As given: {verdict}, {result.memory_per_gpu_gib:.1f} of "
                                      f"{result.memory_capacity_gib:g} GiB per GPU"))
    return text


def _limits_table(result: FitResult) -> Table:
    table = Table(title="What fits (everything else as in the job)", title_justify="left", header_style="bold")
    for name, justify in (("question", "left"), ("answer", "right"), ("job", "right"), ("memory/GPU", "right"),
                          ("global batch", "right"), ("note", "left")):
        table.add_column(name, justify=justify, overflow="fold")
    questions = (
        ("largest micro-batch", result.micro_batch),
        (f"longest seq_len (micro-batch {result.config['micro_batch']})", result.seq_len),
        (f"fewest {result.gpu} (dp grows)", result.n_gpus_needed),
    )
    for question, answer in questions:
        table.add_row(question, _value(answer), f"{answer.job_value:,}", _memory(answer),
                      na(answer.global_batch, "{:,}"), "; ".join(answer.notes))
    return table


def _value(answer: FitAnswer) -> Text:
    if answer.value is None:
        return Text("none fits", style="bold red")
    return Text(f"{answer.value:,}", style="bold green")


def _memory(answer: FitAnswer) -> str:
    if answer.memory_per_gpu_gib is None:
        return f"—/{answer.memory_capacity_gib:g} GiB"
    return _gib(answer.memory_per_gpu_gib, answer.memory_capacity_gib)


def _cheapest_table(result: FitResult) -> Table | Text:
    cheapest = result.cheapest_gpu
    by = "the run's cost" if cheapest.ranked_by == "cost_usd" else "$/hour (no training.tokens)"
    if not cheapest.ranked:
        return Text(f"Cheapest GPU type: none — {cheapest.notes[0]}", style="bold red")
    table = Table(title=f"Cheapest GPU type (fewest GPUs of each that fit, ranked by {by})", title_justify="left",
                  header_style="bold")
    for name in ("#", "GPU", "GPUs", "memory/GPU", "$/hour", "total time", "cost", "cheapest offer"):
        table.add_column(name, justify="left" if name in ("GPU", "cheapest offer") else "right", overflow="fold")
    for rank, row in enumerate(cheapest.ranked, 1):
        per_hour = f"{na(row.usd_per_hour, '${:,.2f}')} ({na(row.usd_per_gpu_hour, '${:,.2f}')}/GPU)"
        memory = _gib(row.memory_per_gpu_gib, row.memory_capacity_gib)
        table.add_row(str(rank), _gpu_text(row), f"{row.n_gpus:,}", memory, per_hour, duration_text(row.total_time_s),
                      money_text(row.cost_usd), row.offer or NA, style="bold" if rank == 1 else None)
    return table


def _gpu_text(row: GpuTypeFit) -> str:
    return row.gpu + (" (job's)" if row.is_job_gpu else "")


def _gib(memory_gib: float, capacity_gib: float) -> str:
    return f"{memory_gib:.1f}/{capacity_gib:g} GiB"


def _apart(result: FitResult) -> Text:
    cheapest = result.cheapest_gpu
    text = Text()
    if cheapest.unpriced:
        listed = ", ".join(f"{r.gpu} × {r.n_gpus:,}" for r in cheapest.unpriced)
        text.append(f"fits, but no catalog price: {listed}\n")
    if cheapest.fits_nowhere:
        text.append(f"fits on none up to {result.max_gpus:,} GPUs: {', '.join(cheapest.fits_nowhere)}\n")
    if cheapest.unsupported:
        text.append(f"no {result.config['precision']} support or invalid layout: {', '.join(cheapest.unsupported)}\n")
    return text


def _notes(result: FitResult) -> Text:
    text = Text()
    for note in [*result.cheapest_gpu.notes, *result.notes]:
        text.append(f"note: {note}\n", style="dim")
    text.append(f"{result.n_configurations_evaluated:,} configurations through the fit rule", style="dim")
    return text
