"""Rendering: the live view, the report tables and the HTML page show N/A for what is missing,
and render what the report holds (they compute nothing)."""

from __future__ import annotations

import time

from rich.console import Console

from trainrig.monitor.analysis import analyze
from trainrig.monitor.gpu import GpuSource
from trainrig.monitor.host import HostSource, host_info
from trainrig.monitor.live import LiveState, recent_step_figures
from trainrig.report.monitor_html import render_html
from trainrig.report.monitor_live import live_renderable
from trainrig.report.monitor_report import report_renderables, runs_table

from .conftest import fake, record_frames, run_data, steps_rows, unchanged


def text_of(*renderables) -> str:
    console = Console(record=True, width=200)
    for r in renderables:
        console.print(r)
    return console.export_text()


def test_live_view_shows_gpus_host_steps_and_na():
    source = GpuSource.open(fake("rtx2080_not_supported"))
    host = HostSource(None)
    time.sleep(0.02)
    state = LiveState(run_id=7, command=["python", "train.py"], elapsed_s=12.0,
                      gpus=[g.to_dict() for g in source.infos], gpu_rows=source.read(),
                      host_row=host.read(), host=host_info(),
                      step_figures=recent_step_figures(steps_rows([(0.5, 0.1)] * 3), 3, {}))
    source.close()
    text = text_of(live_renderable(state))
    assert "run 7" in text and "NVIDIA GeForce RTX 2080" in text
    assert "MFU N/A" in text  # no FLOPs given: N/A, not 0
    assert "sw_power_cap" in text  # live: what NVML says now (the diagnosis ignores idle caps)
    assert "job CPU N/A" in text  # no job followed
    assert "steps 3" in text


def test_report_tables_render_findings_and_na(store):
    data = record_frames(store, fake("a100_sxm_throttling"), [unchanged] * 3)
    report = analyze(data)
    text = text_of(*report_renderables(report))
    assert "throttling" in text and "evidence:" in text and "below_spec" in text
    assert "tokens/s" in text and "N/A" in text  # no steps were recorded
    empty = analyze(run_data(meta={"nvml": {"reason": "NVML could not start: no driver"}}))
    assert "GPUs: N/A (NVML could not start: no driver)" in text_of(*report_renderables(empty))


def test_runs_table_and_html_render_every_run_and_finding(store):
    data = record_frames(store, fake("a100_sxm_throttling"), [unchanged] * 3)
    report = analyze(data)
    page = render_html(report)
    assert page.startswith("<!doctype html>") and "throttling" in page and "<svg" in page
    table = text_of(runs_table([{**report.run.to_dict(), "duration_s": 1.0,
                                 "steps": report.steps.to_dict(),
                                 "findings": [f.to_dict() for f in report.findings]}]))
    assert "throttling, below_spec" in table
