"""Rich tables for catalog listings; nothing here computes a figure."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table

from trainrig.report.format import na, params_text
from trainrig.specs import GPU, ModelPreset


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
