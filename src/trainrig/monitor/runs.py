"""Past runs for `trainrig runs`: each run with its step statistics and findings.

A run closed normally keeps its summary in the database (computed once at its end); a run that was
killed has none, so its summary is computed from its rows when listed.
"""

from __future__ import annotations

from typing import Any

from trainrig.monitor.store import RunRow, Store

__all__ = ["run_summaries", "summarize", "store_summary", "SUMMARY_KEY"]

SUMMARY_KEY = "summary"


def summarize(report: Any) -> dict[str, Any]:
    """The part of a report that `trainrig runs` shows."""
    data = report.to_dict()
    return {"steps": data["steps"], "vs_estimate": data["vs_estimate"],
            "findings": data["findings"], "samples": data["samples"]}


def store_summary(store: Store, run_id: int) -> dict[str, Any]:
    from trainrig.monitor.analysis import analyze

    summary = summarize(analyze(store.load(run_id)))
    store.set_meta(run_id, {SUMMARY_KEY: summary})
    return summary


def run_summaries(store: Store, limit: int | None = None) -> list[dict[str, Any]]:
    """Runs, newest first: the run row, its duration, and its summary."""
    from trainrig.monitor.analysis import analyze

    out = []
    for run in store.runs(limit):
        meta = store.meta(run.id)
        summary = meta.get(SUMMARY_KEY) if run.status != "running" else None
        if summary is None:
            summary = summarize(analyze(store.load(run.id)))
        out.append({**run.to_dict(), "duration_s": _duration(run), **summary})
    return out


def _duration(run: RunRow) -> float | None:
    return run.ended_at - run.started_at if run.ended_at else None
