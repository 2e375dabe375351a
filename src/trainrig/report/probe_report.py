"""Rich tables for `trainrig probe`; nothing here computes a figure."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from trainrig.probe.results import Check, ProbeResult
from trainrig.report.format import NA, na

__all__ = ["probe_renderables", "probe_json", "VERDICT_STYLE", "bytes_text", "rate_text"]

VERDICT_STYLE = {"OK": "bold green", "LOW": "bold yellow", "FAIL": "bold red", "INFO": "dim"}


def probe_json(result: ProbeResult) -> dict[str, Any]:
    """The JSON document of `--json`."""
    return result.model_dump(mode="json")


def bytes_text(n: float | None) -> str:
    if n is None:
        return NA
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def rate_text(per_s: float | None) -> str:
    """12345678 → `12.3 M/s`."""
    if per_s is None:
        return NA
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if per_s >= scale:
            return f"{per_s / scale:.3g} {unit}/s"
    return f"{per_s:.3g} /s"


def probe_renderables(result: ProbeResult) -> list[RenderableType]:
    """Everything `trainrig probe` shows, in order: machine, GPUs, benchmarks, health."""
    parts: list[RenderableType] = [_system_table(result)]
    if result.gpus:
        parts.append(_gpu_table(result))
    else:
        parts.append(Text(f"No GPU found: {result.nvml.reason or 'NVML sees no device'}.",
                          style="bold yellow"))
    parts += _benchmark_tables(result)
    parts.append(_sections_table(result))
    parts.append(health_table(result.checks))
    parts += [Text(f"note: {n}", style="dim") for n in result.notes]
    return parts


def _system_table(result: ProbeResult) -> Table:
    s = result.system
    table = Table(title=f"Machine {s.hostname}", header_style="bold", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("detected")
    cpu = s.cpu
    table.add_row("CPU", f"{cpu.model or NA} — {na(cpu.sockets, '{}')} socket(s), "
                         f"{na(cpu.cores_physical, '{}')} cores, {na(cpu.threads_logical, '{}')} "
                         f"threads, {na(cpu.usable_cpus, '{}')} usable, "
                         f"{na(cpu.numa_nodes, '{}')} NUMA node(s)")
    table.add_row("RAM", f"{bytes_text(s.memory.total_bytes)} total, "
                         f"{bytes_text(s.memory.available_bytes)} available"
                  + (f", limit {bytes_text(s.memory.cgroup_limit_bytes)}"
                     if s.memory.cgroup_limit_bytes else ""))
    for disk in s.disks:
        table.add_row("disk", f"{disk.mountpoint} {disk.device} ({disk.fstype}, {disk.kind}) "
                              f"{bytes_text(disk.free_bytes)} free of {bytes_text(disk.total_bytes)}")
    for nic in s.nics:
        speed = f"{nic.speed_mbps / 1e3:g} Gb/s" if nic.speed_mbps else "speed N/A"
        table.add_row("NIC", f"{nic.name} ({nic.kind}) {'up' if nic.is_up else 'down'}, {speed}"
                      + (f" of {nic.max_speed_mbps / 1e3:g}" if nic.max_speed_mbps else ""))
    nvml = result.nvml
    table.add_row("NVML", f"{nvml.source}: driver {nvml.driver_version}, CUDA "
                          f"{nvml.cuda_driver_version}" if nvml.available else
                  f"unavailable — {nvml.reason}")
    t = result.torch
    table.add_row("torch", f"{t.version}, CUDA {t.cuda_version}, {t.device_count} device(s)"
                  if t.available else f"not used — {t.reason}")
    return table


def _gpu_table(result: ProbeResult) -> Table:
    table = Table(title="GPUs", header_style="bold")
    for column in ("#", "name", "catalog", "memory", "SM MHz", "power", "temp",
                   "PCIe now / max", "NVLink", "ECC", "slowdown"):
        table.add_column(column)
    for g in result.gpus:
        table.add_row(
            str(g.index), g.name or NA, g.catalog_id or "not matched",
            na(g.memory_total_gib, "{:.0f} GiB"),
            f"{na(g.sm_clock_mhz, '{}')} / {na(g.sm_clock_max_mhz, '{}')}",
            f"{na(g.power_w, '{:.0f}')} / {na(g.power_limit_w, '{:.0f}')} W",
            na(g.temperature_c, "{} °C"),
            f"Gen{na(g.pcie_gen_current, '{}')} x{na(g.pcie_width_current, '{}')} / "
            f"Gen{na(g.pcie_gen_max, '{}')} x{na(g.pcie_width_max, '{}')}",
            f"{na(g.nvlink_active_links, '{}')}/{g.nvlink_links}" if g.nvlink_links else NA,
            NA if g.ecc_enabled is None else ("on" if g.ecc_enabled else "off"),
            NA if g.clock_event_reasons is None else (", ".join(g.clock_event_reasons) or "none"),
        )
    if result.nvml.topology:
        table.caption = "topology: " + " | ".join(
            f"GPU{i}: " + " ".join(row) for i, row in enumerate(result.nvml.topology))
    return table


def _benchmark_tables(result: ProbeResult) -> list[RenderableType]:
    b = result.benchmarks
    parts: list[RenderableType] = []
    for gemm in b.gemm:
        parts.append(_gemm_table(gemm))
    rows = _bandwidth_rows(result)
    if rows:
        table = Table(title="Bandwidth", header_style="bold")
        for column in ("what", "where", "GB/s", "how"):
            table.add_column(column, justify="right" if column == "GB/s" else "left")
        for row in rows:
            table.add_row(*row)
        parts.append(table)
    if b.collectives:
        parts.append(_collectives_table(b.collectives))
    if b.cpu:
        table = Table(title="CPU data loading", header_style="bold")
        for column in ("work", "one core", f"{b.cpu.processes} processes"):
            table.add_column(column, justify="left" if column == "work" else "right")
        table.add_row("tokenize (tokens)", rate_text(b.cpu.tokenize_tokens_per_s_per_core),
                      rate_text(b.cpu.tokenize_tokens_per_s_all_cores))
        table.add_row("collate (tokens)", rate_text(b.cpu.collate_tokens_per_s_per_core),
                      rate_text(b.cpu.collate_tokens_per_s_all_cores))
        parts.append(Group(table, Text(f"{b.cpu.tokenizer}. {b.cpu.method}", style="dim")))
    return parts


def _gemm_table(gemm: Any) -> Group:
    best = Table(title=f"GEMM on {gemm.device}", header_style="bold")
    for column in ("precision", "best TFLOP/s", "shape", "peak", "of peak", "note"):
        best.add_column(column, justify="left" if column in ("precision", "shape", "note")
                        else "right")
    shapes = Table(title=f"Shape efficiency on {gemm.device} (fraction of the best)",
                   header_style="bold")
    shapes.add_column("m×n×k")
    listed = [p for p in gemm.precisions if p.points]
    for p in listed:
        shapes.add_column(p.precision, justify="right")
    for p in gemm.precisions:
        of_peak = p.best_tflops / p.peak_tflops if p.best_tflops and p.peak_tflops else None
        best.add_row(p.precision, na(p.best_tflops), p.best_shape or NA, na(p.peak_tflops),
                     na(of_peak, "{:.0%}"), p.skipped or "")
    keys = list(dict.fromkeys((pt.m, pt.n, pt.k) for p in listed for pt in p.points))
    for key in keys:
        cells = []
        for p in listed:
            point = next((pt for pt in p.points if (pt.m, pt.n, pt.k) == key), None)
            cells.append(f"{point.tflops:,.1f} ({point.fraction_of_best:.0%})"
                         if point and point.fraction_of_best is not None else NA)
        shapes.add_row("×".join(map(str, key)), *cells)
    return Group(best, Text(gemm.method, style="dim"), shapes)


def _bandwidth_rows(result: ProbeResult) -> list[tuple[str, str, str, str]]:
    b, rows = result.benchmarks, []
    for copy in b.memory:
        rows.append(("device copy", copy.device, na(copy.copy_gbs), copy.method))
    for p in b.pcie:
        where = f"GPU{p.gpu_index}" + (f" (Gen{p.link_gen_during} x{p.link_width_during})"
                                       if p.link_gen_during else "")
        for label, value in (("host→device pinned", p.h2d_pinned_gbs),
                             ("device→host pinned", p.d2h_pinned_gbs),
                             ("host→device pageable", p.h2d_pageable_gbs),
                             ("device→host pageable", p.d2h_pageable_gbs),
                             ("both directions pinned", p.bidirectional_pinned_gbs)):
            rows.append((label, where, na(value), p.method if label.startswith("host→device p")
                         and "pinned" in label else ""))
    if b.p2p:
        for pair in b.p2p.pairs:
            rows.append(("peer copy", f"GPU{pair.src}→GPU{pair.dst}"
                         + ("" if pair.peer_access else " (no P2P)"), na(pair.gbs), b.p2p.method))
    if b.hostmem:
        rows.append(("host memory copy, 1 core", "node", na(b.hostmem.copy_gbs_one_core, "{:.2f}"),
                     b.hostmem.method))
        rows.append((f"host memory copy, {b.hostmem.processes} processes", "node",
                     na(b.hostmem.copy_gbs_all_cores, "{:.2f}"), ""))
    if b.storage:
        s = b.storage
        where = f"{s.path} ({s.filesystem}, {s.device_kind})"
        rows.append(("storage sequential read", where, na(s.read_gbs, "{:.2f}"), s.read_method))
        rows.append(("storage write + fsync", where, na(s.write_gbs, "{:.2f}"), s.write_method))
    return rows


def _collectives_table(c: Any) -> Group:
    table = Table(title=f"Collectives: {c.backend}, {c.world_size} ranks on {c.nnodes} node(s), "
                        "bus bandwidth GB/s", header_style="bold")
    table.add_column("size")
    for op in c.ops:
        table.add_column(op.op, justify="right")
    sizes = sorted({p.size_bytes for op in c.ops for p in op.points})
    for size in sizes:
        cells = []
        for op in c.ops:
            point = next((p for p in op.points if p.size_bytes == size), None)
            cells.append(na(point.busbw_gbs if point else None, "{:.2f}"))
        table.add_row(bytes_text(size), *cells)
    errors = [f"{op.op}: {op.error}" for op in c.ops if op.error]
    note = c.method + ("; " + "; ".join(errors) if errors else "")
    return Group(table, Text(note, style="dim"))


def _sections_table(result: ProbeResult) -> Table:
    table = Table(title=f"Benchmarks run ({result.duration_s:.1f} s of "
                        f"{result.time_limit_s:g} s allowed)", header_style="bold")
    for column in ("section", "status", "seconds", "why"):
        table.add_column(column, justify="right" if column == "seconds" else "left")
    for s in result.sections:
        table.add_row(s.name, s.status, f"{s.duration_s:.1f}", s.reason or "")
    return table


def health_table(checks: list[Check]) -> Table:
    """Each figure beside its spec and what such hardware normally reaches, with the verdict."""
    table = Table(title="Health", header_style="bold")
    for column in ("where", "figure", "measured", "spec", "expected", "verdict", "likely cause — action"):
        table.add_column(column, justify="right" if column in ("measured", "spec", "expected")
                         else "left")
    for c in checks:
        unit = f" {c.unit}" if c.unit else ""
        advice = " — ".join(x for x in (c.cause, c.action) if x)
        table.add_row(c.component, c.name, _figure(c.measured) + unit, _figure(c.spec),
                      _figure(c.expected), Text(c.verdict, style=VERDICT_STYLE[c.verdict]), advice)
    return table


def _figure(value: float | None) -> str:
    if value is None:
        return NA
    if abs(value) >= 1e5:
        return f"{value:.3g}"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"
