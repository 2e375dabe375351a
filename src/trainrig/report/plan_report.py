"""Rich rendering of a PlanResult and a CompareResult. Nothing here computes a figure."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainrig.plan.result import CompareResult, NodeAdvice, Plan, PlanResult
from trainrig.report.format import NA, duration_text, money_text, na

__all__ = ["plan_view", "compare_view", "hardware_text", "node_table", "parallel_text"]


def plan_view(result: PlanResult) -> Group:
    """Header, the verdict when nothing meets the constraints, the plans, the top plan's node, notes."""
    parts = [_plan_header(result)]
    if result.message:
        parts.append(Text(("nothing meets the constraints: " if not result.feasible else "") + result.message,
                          style="bold red"))
    if result.plans:
        priced = [p for p in result.plans if p.no_price_reason is None]
        unpriced = [p for p in result.plans if p.no_price_reason is not None]
        if priced:
            parts.append(_plans_table(priced, "Best configurations" if result.feasible else "Closest configurations"))
        if unpriced:
            parts.append(_plans_table(unpriced, UNPRICED_TITLE))
        parts.append(_layouts_table(result.plans))
        top = result.plans[0]
        if top.node is not None:
            parts.append(node_table(top.node, f"The node for plan #{top.rank}"))
    parts.append(_notes(result.notes))
    return Group(*parts)


def _plan_header(result: PlanResult) -> Text:
    text = Text()
    text.append(f"Objective: {result.objective}", style="bold")
    text.append("   constraints: " + _constraints_text(result.constraints) + "\n")
    searched = duration_text(result.search_time_s) if result.search_time_s is not None else NA
    text.append(f"{result.n_configurations_evaluated:,} configurations evaluated, "
                f"{result.n_configurations_fitting:,} fit in memory, {result.n_configurations_feasible:,} meet the "
                f"constraints (search {searched})", style="dim")
    return text


def _constraints_text(constraints: dict) -> str:
    parts = []
    if constraints.get("deadline_days") is not None:
        parts.append(f"deadline {constraints['deadline_days']:g} days")
    if constraints.get("budget_usd") is not None:
        parts.append(f"budget {money_text(constraints['budget_usd'])}")
    parts.append(f"≤ {constraints['max_gpus']} GPUs")
    if constraints.get("max_nodes"):
        parts.append(f"≤ {constraints['max_nodes']} nodes")
    if constraints.get("priced_only"):
        parts.append("priced offers only")
    return ", ".join(parts)


UNPRICED_TITLE = "Without a price (no offer in the catalog for that GPU or node count), apart from any ranking above"


def hardware_text(plan: Plan) -> str:
    """`64 × H100-SXM5-80GB`, then `8 nodes · aws p5.48xlarge`."""
    nodes = f"{plan.n_nodes} node{'s' if plan.n_nodes > 1 else ''}"
    where = f"{plan.offer.provider} {plan.offer.instance}" if plan.offer else "no offer"
    return f"{plan.n_gpus} × {plan.gpu}\n{nodes} · {where}"


def _hardware_cell(plan: Plan) -> Text:
    """The hardware, then why it has no price and how the same layout scales (when it does)."""
    if plan.no_price_reason:
        text = Text(f"{plan.n_gpus} × {plan.gpu}\n{plan.n_nodes} node{'s' if plan.n_nodes > 1 else ''} · ")
        text.append(plan.no_price_reason, style="yellow")
    else:
        text = Text(hardware_text(plan))
    if plan.scaling_note:
        text.append(f"\n{plan.scaling_note}", style="dim")
    return text


def _plans_table(plans: list[Plan], title: str) -> Table:
    """What each plan rents and what it achieves."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for column, justify in (("#", "right"), ("hardware", "left"), ("total time", "right"), ("cost", "right"),
                            ("GPU-hours", "right"), ("MFU", "right"), ("bottleneck", "left")):
        table.add_column(column, justify=justify)
    for plan in plans:
        est = plan.estimate
        cost = money_text(est.cost_usd) + (f"\n${est.price_usd_per_gpu_hour:g}/GPU-h" if est.cost_usd else "")
        table.add_row(str(plan.rank), _hardware_cell(plan), duration_text(est.total_time_s), cost,
                      na(est.gpu_hours, "{:,.0f}"), f"{est.mfu:.1%}", _binds(plan))
    return table


def _layouts_table(plans: list[Plan], labels: list[str] | None = None, first: str = "#") -> Table:
    """How each plan runs: parallelism, batch split, memory savers, memory and step time."""
    table = Table(title="How to run them", title_justify="left", header_style="bold")
    table.add_column(first, justify="right" if first == "#" else "left", no_wrap=True)
    for column in ("tp·pp·dp·cp·ep", "ZeRO", "mb×accum", "recompute", "GiB/GPU", "step"):
        table.add_column(column, justify="left" if column in ("recompute", "tp·pp·dp·cp·ep") else "right")
    for label, plan in zip(labels or [str(p.rank) for p in plans], plans, strict=True):
        lay, est = plan.layout, plan.estimate
        table.add_row(label, parallel_text(plan), str(lay["zero"]), f"{lay['micro_batch']}×{lay['grad_accum']}",
                      lay["recompute"], f"{est.memory_per_gpu_gib:.1f}/{est.memory_capacity_gib:g}",
                      duration_text(est.step_time_s))
    return table


def parallel_text(plan: Plan) -> str:
    """`8+sp·4×2·16·1·1`: tp (with sequence parallelism), pp (× interleaving), dp, cp, ep."""
    lay = plan.layout
    tp = f"{lay['tp']}+sp" if lay["sequence_parallel"] else str(lay["tp"])
    pp = f"{lay['pp']}×{lay['vpp']}" if lay["vpp"] > 1 else str(lay["pp"])
    return f"{tp}·{pp}·{lay['dp']}·{lay['cp']}·{lay['ep']}"


def _count_text(plan: Plan) -> Text:
    """`16 (2 nodes)` then the offer (or why there is no price), then how the same layout scales."""
    where = f"{plan.offer.provider} {plan.offer.instance}" if plan.offer else "no offer"
    text = Text(f"{plan.n_gpus} ({plan.n_nodes} node{'s' if plan.n_nodes > 1 else ''})\n")
    text.append(plan.no_price_reason or where, style="yellow" if plan.no_price_reason else "")
    if plan.scaling_note:
        text.append(f"\n{plan.scaling_note}", style="dim")
    return text


def _binds(plan: Plan) -> Text:
    text = Text(plan.estimate.bottleneck)
    for miss in plan.misses:
        text.append(f"\nmisses: {miss}", style="red")
    return text


def node_table(node: NodeAdvice, title: str) -> Table:
    """CPU, RAM, storage and network, each with its reason (which starts with the choice)."""
    table = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for label, key in (("CPU", "cpu"), ("RAM", "ram"), ("storage", "storage"), ("network", "network")):
        table.add_row(f"  {label}", node.reasons[key])
    return table


def _notes(notes: list[str]) -> Text:
    text = Text()
    for note in notes:
        text.append(f"note: {note}\n", style="dim")
    return text


def compare_view(result: CompareResult) -> Group:
    """One row per GPU type: its best configuration's time, cost, headroom and what binds; the GPU types
    whose best has no price in a table of their own after the others."""
    unpriced = [row for row in result.rows if row.plan is not None and row.plan.no_price_reason is not None]
    others = [row for row in result.rows if row not in unpriced]
    header = Text(f"{result.n_configurations_evaluated:,} configurations evaluated, "
                  f"{result.n_configurations_fitting:,} fit in memory; constraints: "
                  f"{_constraints_text(result.constraints)}", style="dim")
    parts = [header]
    if others:
        parts.append(_compare_table(others, f"Best configuration per GPU type (objective: {result.objective})"))
    if unpriced:
        parts.append(_compare_table(unpriced, UNPRICED_TITLE))
    planned = [row for row in others + unpriced if row.plan is not None]
    if planned:
        parts.append(_layouts_table([row.plan for row in planned], [row.gpu for row in planned], first="GPU"))
    return Group(*parts, _notes(result.notes))


def _compare_table(rows: list, title: str) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("GPU", no_wrap=True)
    for column, justify in (("GPUs", "left"), ("total time", "right"), ("cost", "right"), ("headroom", "right"),
                            ("MFU", "right"), ("what binds", "left")):
        table.add_column(column, justify=justify)
    for row in rows:
        if row.plan is None:
            table.add_row(row.gpu, Text(row.reason or "", style="red"), NA, NA, NA, NA, "")
            continue
        plan, est = row.plan, row.plan.estimate
        headroom = f"{plan.memory_headroom_gib:.1f} GiB\n{plan.memory_headroom_gib / est.memory_capacity_gib:.0%}"
        binds = Text(est.bottleneck)
        if row.reason:
            binds.append(f"\nmisses: {row.reason}", style="red")
        table.add_row(row.gpu, _count_text(plan), duration_text(est.total_time_s), money_text(est.cost_usd),
                      headroom, f"{est.mfu:.1%}", binds)
    return table
