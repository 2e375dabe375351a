"""The SQLite store: WAL, N/A kept as NULL, run references, and samples that survive SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainrig.cli.main import app
from trainrig.errors import TrainrigError
from trainrig.monitor.analysis import analyze
from trainrig.monitor.home import database_path
from trainrig.monitor.schema import GPU_COLUMNS, HOST_COLUMNS
from trainrig.monitor.store import Store

HERE = Path(__file__).parent


def test_database_is_in_wal_mode_under_trainrig_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINRIG_HOME", str(tmp_path / "h"))
    store = Store.open(database_path())
    assert store.path == tmp_path / "h" / "monitor.sqlite"
    mode = store._query("PRAGMA journal_mode")[1][0][0]
    assert mode == "wal"
    store.close()


def test_missing_metrics_round_trip_as_none_and_json_columns_decode(store):
    run_id = store.create_run("t", ["python", "x.py"], os.getpid())
    gpu = {c.name: None for c in GPU_COLUMNS} | {"t": 1.0, "gpu": 0, "power_w": 123.5}
    host = {c.name: None for c in HOST_COLUMNS} | {"t": 1.0, "cpu_per_core_pct": [10.0, None],
                                                  "workers_cpu_pct": [99.5]}
    step = {"rank": 0, "step": 0, "t_end": 2.0, "step_s": 0.5, "data_wait_s": 0.1, "tokens": None}
    store.write(run_id, [gpu], [host], [step])
    data = store.load(run_id)
    assert data.gpu_samples[0]["power_w"] == 123.5
    assert data.gpu_samples[0]["utilization_gpu_pct"] is None
    assert data.host_samples[0]["cpu_per_core_pct"] == [10.0, None]
    assert data.host_samples[0]["workers_cpu_pct"] == [99.5]
    assert data.steps[0]["tokens"] is None and data.steps[0]["step_s"] == 0.5
    assert data.run.command == ["python", "x.py"] and data.run.status == "running"


def test_run_references(store):
    with pytest.raises(TrainrigError) as empty:
        store.resolve("latest")
    assert empty.value.field == "RUN"
    first = store.create_run("a", None, None)
    second = store.create_run("b", None, None)
    assert store.resolve("latest") == second
    assert store.resolve(str(first)) == first
    for bad in ("abc", "999"):
        with pytest.raises(TrainrigError) as error:
            store.resolve(bad)
        assert error.value.field == "RUN"


def test_a_running_run_whose_process_is_gone_reads_as_lost(store):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    run_id = store.create_run("x", None, int(gone.stdout))
    store.write(run_id, step_rows=[{"rank": 0, "step": 0, "t_end": 5e9, "step_s": 1.0,
                                    "data_wait_s": 0.0, "tokens": 1}])
    run = store.run(run_id)
    assert run.status == "lost" and run.ended_at == 5e9
    alive = store.create_run("y", None, os.getpid())
    assert store.run(alive).status == "running"


def test_sigkilled_job_leaves_every_flushed_sample_readable(tmp_path):
    """A job records itself (in-process monitor, 0.2 s flushes) and prints each flush; after it
    is SIGKILLed, the database holds at least what the last printed flush had committed."""
    env = {**os.environ, "TRAINRIG_HOME": str(tmp_path / "home")}
    env.pop("TRAINRIG_MONITOR_RUN", None)
    process = subprocess.Popen(
        [sys.executable, str(HERE / "train_tiny.py"), "--steps", "100000", "--device-s", "0.01",
         "--hz", "10", "--flush-interval-s", "0.2", "--print-flushes"],
        stdout=subprocess.PIPE, text=True, env=env)
    flushes = []
    try:
        for line in process.stdout:
            if line.startswith("flushed"):
                flushes.append([int(v) for v in line.split()[1:]])
            if len(flushes) >= 4:
                break
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL and len(flushes) == 4
    run_id, gpu_rows, host_rows, steps = flushes[-1]
    store = Store.open(tmp_path / "home" / "monitor.sqlite")
    data = store.load(run_id)
    assert len(data.host_samples) >= host_rows > 0
    assert len(data.steps) >= steps > 0
    assert len(data.gpu_samples) >= gpu_rows
    assert data.run.status == "lost"
    report = analyze(data)
    assert report.steps.steps == len(data.steps)
    store.close()
    listed = CliRunner().invoke(app, ["runs", "--json"], env={"TRAINRIG_HOME": str(tmp_path / "home")})
    assert listed.exit_code == 0, listed.output
    runs = json.loads(listed.stdout)
    assert runs[0]["id"] == run_id and runs[0]["status"] == "lost"
    assert runs[0]["steps"]["steps"] == len(data.steps)
