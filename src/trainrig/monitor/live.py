"""Figures for a live view and the exporter: the recent steps' rate and MFU, the latest samples.

Pure functions over rows already in memory (no I/O): the CLI's live view and the Prometheus
exporter call them on every refresh or scrape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["recent_step_figures", "LiveState", "RECENT_WINDOW_STEPS"]

RECENT_WINDOW_STEPS = 20


def recent_step_figures(steps: Sequence[dict[str, Any]], count: int,
                        workload: dict[str, Any]) -> dict[str, float | None]:
    """Last step time and data wait; tokens/s, data-wait share and MFU over the recent window."""
    window = list(steps)[-RECENT_WINDOW_STEPS:]
    out: dict[str, float | None] = {"steps": float(count), "step_s": None, "data_wait_s": None,
                                    "data_wait_share": None, "tokens_per_s": None, "mfu": None,
                                    "model_tflops_per_device": None}
    if not window:
        return out
    last = window[-1]
    seconds = sum(s["step_s"] for s in window)
    out["step_s"], out["data_wait_s"] = last["step_s"], last["data_wait_s"]
    if seconds > 0:
        out["data_wait_share"] = sum(s["data_wait_s"] or 0 for s in window) / seconds
    counted = [s for s in window if s.get("tokens") is not None]
    counted_s = sum(s["step_s"] for s in counted)
    if counted and counted_s > 0:
        ranks = max(1, len({s.get("rank", 0) for s in counted}))
        out["tokens_per_s"] = sum(s["tokens"] for s in counted) / counted_s * ranks
    _add_mfu(out, workload, ranks=len({s.get("rank", 0) for s in window}))
    return out


def _add_mfu(out: dict[str, float | None], workload: dict[str, Any], ranks: int) -> None:
    flops, peak = workload.get("flops_per_token"), workload.get("peak_tflops_per_device")
    devices = workload.get("devices") or max(1, ranks)
    if out["tokens_per_s"] and flops:
        tflops = out["tokens_per_s"] * flops / devices / 1e12
        out["model_tflops_per_device"] = tflops
        out["mfu"] = tflops / peak if peak else None


@dataclass
class LiveState:
    """What the live view shows now."""

    run_id: int
    command: list[str] | None
    elapsed_s: float
    gpus: list[dict[str, Any]]
    gpu_rows: list[dict[str, Any]]
    host_row: dict[str, Any] | None
    host: dict[str, Any]
    step_figures: dict[str, float | None]
    findings: list[Any] = field(default_factory=list)
    nvml_reason: str | None = None
    sampler_errors: int = 0
    storage: dict[str, Any] = field(default_factory=dict)
    """`Store.storage_state()`: empty unless the disk refused writes."""
