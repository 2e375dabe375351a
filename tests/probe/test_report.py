"""Rendering: rich tables, JSON and HTML from one result (with and without matplotlib)."""

from __future__ import annotations

import json
import sys

from rich.console import Console

from trainrig.probe.health import Specs, evaluate
from trainrig.report import probe_html
from trainrig.report.probe_report import bytes_text, probe_json, probe_renderables, rate_text

from .test_runner import _benchmarked


def _result():
    result = _benchmarked()
    result.checks = evaluate(result, Specs())
    return result


def test_tables_render_with_na_for_missing_figures():
    console = Console(record=True, width=200)
    result = _result()
    result.gpus[1] = result.gpus[1].model_copy(update={"power_w": None, "ecc_enabled": None})
    for part in probe_renderables(result):
        console.print(part)
    text = console.export_text()
    for expected in ("GPUs", "Bandwidth", "Collectives", "CPU data loading", "Health", "N/A",
                     "H100-SXM5-80GB"):
        assert expected in text


def test_json_is_the_whole_result():
    data = json.loads(json.dumps(probe_json(_result())))
    assert data["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert data["benchmarks"]["storage"]["read_gbs"] == 6.5 and "checks" in data


def test_html_has_plots_when_matplotlib_is_there():
    if not probe_html.plots_available():
        return  # covered by the next test
    page = probe_html.render_html(_result())
    assert page.startswith("<!doctype html>") and "<svg" in page and "Health" in page


def test_html_without_matplotlib_says_how_to_get_plots(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert not probe_html.plots_available()
    page = probe_html.render_html(_result())
    assert probe_html.MATPLOTLIB_HINT in page and "<svg" not in page and "<table>" in page


def test_unit_text():
    assert bytes_text(3 * 2**30) == "3 GiB" and bytes_text(None) == "N/A"
    assert rate_text(2.5e6) == "2.5 M/s" and rate_text(None) == "N/A"
