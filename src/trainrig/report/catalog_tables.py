"""Rich tables for catalog listings; nothing here computes a figure."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rich.table import Table

from trainrig.report.format import NA, na, params_text
from trainrig.specs import GPU, ModelPreset
from trainrig.specs.framework import FrameworkSpec
from trainrig.specs.hardware import CPU, HostMemory, Link, Storage
from trainrig.specs.offer import Offer


def gpu_table(gpus: Iterable[GPU]) -> Table:
    table = Table(title="GPUs (dense peak TFLOP/s)", header_style="bold")
    for column in ("id", "memory", "GB/s", "bf16", "fp8", "fp32", "host", "scale-up", "TDP", "year"):
        table.add_column(column, justify="left" if column in ("id", "host", "scale-up") else "right")
    for gpu in gpus:
        p = gpu.peak_tflops
        scale_up = f"{gpu.scale_up} {gpu.scale_up_gbs:g} GB/s" if gpu.scale_up_gbs else "none"
        table.add_row(
            gpu.id,
            f"{gpu.memory_gib:g} GiB {gpu.memory_type}",
            f"{gpu.memory_bandwidth_gbs:,.0f}",
            na(p.bf16),
            na(p.fp8),
            na(p.fp32),
            f"PCIe{gpu.pcie_gen} x{gpu.pcie_lanes}",
            scale_up,
            f"{gpu.tdp_w:g} W",
            str(gpu.year),
        )
    return table


def model_table(presets: Iterable[ModelPreset]) -> Table:
    table = Table(title="Model presets", header_style="bold")
    for column in ("id", "params", "active", "layers", "hidden", "heads/kv", "ffn", "vocab"):
        table.add_column(column, justify="left" if column == "id" else "right")
    for preset in presets:
        m = preset.spec
        ffn = f"{m.n_experts}×{m.expert_ffn}" if m.is_moe else str(m.ffn_hidden)
        table.add_row(
            preset.id,
            params_text(m.n_params),
            params_text(m.n_active_params),
            str(m.n_layers),
            str(m.hidden),
            f"{m.n_heads}/{m.kv_heads}",
            ffn,
            f"{m.vocab:,}",
        )
    return table


def _entry_table(title: str, entries: Iterable, columns: dict[str, Callable[[Any], str]]) -> Table:
    """One row per catalog entry; the first column (id) left-aligned, figures right-aligned."""
    table = Table(title=title, header_style="bold")
    for i, header in enumerate(columns):
        table.add_column(header, justify="left" if i == 0 or header in _TEXT_COLUMNS else "right")
    for entry in entries:
        table.add_row(*(render(entry) for render in columns.values()))
    return table


_TEXT_COLUMNS = {"name", "kind", "vendor", "generation", "memory", "provider", "instance", "gpu", "network",
                 "interconnect", "region", "type", "kernels", "parallelism"}


def link_table(links: Iterable[Link]) -> Table:
    return _entry_table("Links (effective GB/s per direction)", links, {
        "id": lambda e: e.id, "kind": lambda e: e.kind, "GB/s": lambda e: f"{e.bandwidth_gbs:,.1f}",
        "latency µs": lambda e: f"{e.latency_us:g}", "efficiency": lambda e: f"{e.efficiency:.0%}",
        "line Gb/s": lambda e: na(e.line_rate_gbps, "{:,.0f}"),
        "ports/node": lambda e: na(e.default_ports_per_node, "{}"),
    })


def cpu_table(cpus: Iterable[CPU]) -> Table:
    return _entry_table("CPUs", cpus, {
        "id": lambda e: e.id, "vendor": lambda e: e.vendor, "generation": lambda e: e.generation,
        "cores": lambda e: str(e.cores), "threads": lambda e: str(e.threads),
        "GHz base/boost": lambda e: f"{e.base_clock_ghz:g}/{e.boost_clock_ghz:g}",
        "memory": lambda e: f"{e.memory_channels} × {e.memory}", "PCIe": lambda e: f"gen{e.pcie_gen} × {e.pcie_lanes}",
        "year": lambda e: str(e.year),
    })


def host_memory_table(memories: Iterable[HostMemory]) -> Table:
    return _entry_table("Host memory (per channel)", memories, {
        "id": lambda e: e.id, "type": lambda e: e.ddr_type, "MT/s": lambda e: f"{e.transfer_rate_mts:,}",
        "GB/s per channel": lambda e: f"{e.per_channel_gbs:g}", "efficiency": lambda e: f"{e.efficiency:.0%}",
    })


def storage_table(storages: Iterable[Storage]) -> Table:
    return _entry_table("Storage (sequential GB/s)", storages, {
        "id": lambda e: e.id, "kind": lambda e: e.kind, "read": lambda e: f"{e.seq_read_gbs:g}",
        "write": lambda e: f"{e.seq_write_gbs:g}", "random read IOPS": lambda e: na(e.random_read_iops, "{:,.0f}"),
        "latency ms": lambda e: f"{e.latency_ms:g}",
    })


def offer_table(offers: Iterable[Offer]) -> Table:
    return _entry_table("Cloud offers", offers, {
        "id": lambda e: e.id, "provider": lambda e: e.provider, "instance": lambda e: e.instance,
        "gpu": lambda e: e.gpu,
        "GPUs/node": lambda e: str(e.gpus_per_node), "network": lambda e: e.network or NA,
        "$/GPU-h": lambda e: na(e.usd_per_gpu_hour, "{:.2f}"), "date": lambda e: e.price_date.isoformat(),
        "region": lambda e: e.region or NA,
    })


def framework_table(frameworks: Iterable[FrameworkSpec]) -> Table:
    def kernels(e: FrameworkSpec) -> str:
        return "as the job sets" if e.fused_kernels is None else "fused" if e.fused_kernels else "eager"

    def parallelism(e: FrameworkSpec) -> str:
        return ", ".join(n for n, on in (("TP", e.tensor_parallel), ("PP", e.pipeline_parallel)) if on) or "data only"

    return _entry_table("Training frameworks", frameworks, {
        "id": lambda e: e.id, "name": lambda e: e.name, "kernels": kernels, "parallelism": parallelism,
        "LoRA dropout": lambda e: f"{e.lora_dropout:g}", "QLoRA": lambda e: "yes" if e.quantized_lora else "no",
    })


def sections_table(counts: dict[str, int]) -> Table:
    table = Table(title="Catalog sections", caption="`trainrig catalog SECTION` lists one", header_style="bold")
    table.add_column("section")
    table.add_column("entries", justify="right")
    for name, count in counts.items():
        table.add_row(name, str(count))
    return table
