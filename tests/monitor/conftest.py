"""Shared helpers for the monitor tests: a store in tmp, fake NVML sessions whose answers change
between samples (built from the shipped recordings' values), synthetic rows for rule tests."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import pytest

from trainrig.monitor.gpu import GpuSource
from trainrig.monitor.store import RunData, RunRow, Store
from trainrig.probe.nvml_fake import FakeNvml, load_recording

GIB = 2**30


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path / "monitor.sqlite")
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    """Every test writes under its own TRAINRIG_HOME, never the user's ~/.trainrig."""
    monkeypatch.setenv("TRAINRIG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TRAINRIG_MONITOR_RUN", raising=False)
    monkeypatch.delenv("TRAINRIG_MONITOR_DB", raising=False)


def fake(name: str) -> FakeNvml:
    """A fake backend over a private copy of a shipped recording (safe to change)."""
    return FakeNvml(copy.deepcopy(load_recording(name)))


def answer(name: str, gpu: int, function: str) -> Any:
    """A value as a shipped recording has it, to build sequences from real recorded answers."""
    return copy.deepcopy(load_recording(name)["devices"][gpu][function])


Frame = Callable[[FakeNvml], None]


def record_frames(store: Store, backend: FakeNvml, frames: list[Frame], *, host: dict | None = None,
                  gap_s: float = 0.0) -> RunData:
    """One run: before each sample, apply a frame (change the fake's answers), then read every GPU."""
    run_id = store.create_run("test", ["test"], None)
    source = GpuSource.open(backend)
    store.set_meta(run_id, {"gpus": [g.to_dict() for g in source.infos],
                            "nvml": {"available": bool(source.infos),
                                     "reason": source.unavailable_reason},
                            "host": host or {"cpu_count": 8, "ram_total_bytes": 64 * GIB,
                                             "memory_limit_bytes": 64 * GIB}})
    for frame in frames:
        frame(backend)
        store.write(run_id, gpu_rows=source.read())
        if gap_s:
            time.sleep(gap_s)
    source.close()
    store.finish_run(run_id, "finished")
    return store.load(run_id)


def unchanged(backend: FakeNvml) -> None:
    return None


def set_answer(gpu: int, function: str, value: Any) -> Frame:
    def frame(backend: FakeNvml) -> None:
        backend.devices[gpu][function] = copy.deepcopy(value)
    return frame


def steps_rows(durations: list[tuple[float, float]], rank: int = 0, tokens: int | None = 1000,
               start_id: int = 1, t0: float = 1000.0) -> list[dict[str, Any]]:
    """Step rows (step_s, data_wait_s) as the store returns them."""
    rows, t = [], t0
    for i, (step_s, wait_s) in enumerate(durations):
        t += step_s
        rows.append({"id": start_id + i, "run_id": 1, "rank": rank, "step": i, "t_end": t,
                     "step_s": step_s, "data_wait_s": wait_s, "tokens": tokens})
    return rows


def host_row(i: int, **values: Any) -> dict[str, Any]:
    row = {"id": i + 1, "run_id": 1, "t": 1000.0 + i * 0.1, "cpu_pct": 30.0, "cpu_per_core_pct": [30.0],
           "iowait_pct": 0.0, "ram_used_bytes": 8 * GIB, "ram_available_bytes": 56 * GIB,
           "swap_used_bytes": 0, "disk_read_bps": 0.0, "disk_write_bps": 0.0, "net_rx_bps": 0.0,
           "net_tx_bps": 0.0, "net_util_pct": None, "job_cpu_pct": 100.0, "job_rss_bytes": GIB,
           "job_read_bps": 0.0, "job_processes": 1, "workers": 0, "workers_cpu_pct": []}
    row.update(values)
    return row


def run_data(steps: list[dict[str, Any]] | None = None, host: list[dict[str, Any]] | None = None,
             gpu: list[dict[str, Any]] | None = None, meta: dict[str, Any] | None = None) -> RunData:
    run = RunRow(1, "synthetic", "finished", 1000.0, 1010.0, None, "test", ["x"], 0)
    base_meta = {"host": {"cpu_count": 8, "ram_total_bytes": 64 * GIB, "memory_limit_bytes": 64 * GIB,
                          "memory_limit_source": "host RAM"}}
    base_meta.update(meta or {})
    return RunData(run=run, meta=base_meta, gpu_samples=gpu or [], host_samples=host or [],
                   steps=steps or [])
