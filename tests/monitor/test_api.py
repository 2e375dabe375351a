"""The in-process API: `with trainrig.monitor(...) as m`, joining a wrapper's run, bad input."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import trainrig
from trainrig.errors import TrainrigError
from trainrig.monitor.home import database_path
from trainrig.monitor.recording import ENV_DB, ENV_RUN
from trainrig.monitor.store import Store

from .conftest import fake

EXAMPLE_JOB = Path(__file__).parents[2] / "examples" / "llama3-8b-8xh100.yaml"


def test_import_trainrig_stays_light():
    code = ("import sys, trainrig; trainrig.monitor; "
            "print(sorted(m for m in ('psutil', 'pynvml', 'torch', 'sqlite3', 'prometheus_client', "
            "'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert "monitor" in trainrig.__all__


def test_a_monitored_loop_records_samples_steps_and_the_estimate():
    with trainrig.monitor(hz=10, job=str(EXAMPLE_JOB), nvml_backend=fake("h100_sxm_healthy"),
                          flush_interval_s=0.1, name="api") as m:
        for _ in m.data(range(6)):
            time.sleep(0.03)
            m.step(tokens=8192)
        report = m.report()
    assert report.steps.steps == 6 and report.samples["gpu"] >= 2 and report.samples["host"] >= 1
    job = trainrig.load_job(str(EXAMPLE_JOB))
    estimate = trainrig.estimate(job)
    assert report.comparison.estimated_step_time_s == pytest.approx(estimate.step_time_s)
    assert "s/step, estimated" in report.comparison.message
    from trainrig.estimate.flops import flops_per_token

    assert report.steps.flops_per_token == pytest.approx(
        flops_per_token(job.model, job.training.seq_len, job.training.method))
    assert report.steps.peak_tflops_per_device == job.hardware.gpu.peak("bf16")
    store = Store.open(database_path())
    run = store.run(m.run_id)
    assert run.status == "finished" and run.name == "api"
    assert store.meta(m.run_id)["sampler"]["errors"] == 0
    store.close()


def test_an_exception_in_the_loop_marks_the_run_failed():
    with pytest.raises(RuntimeError), trainrig.monitor(hz=5, nvml_backend=fake("h100_sxm_healthy")) as m:
        raise RuntimeError("boom")
    store = Store.open(database_path())
    assert store.run(m.run_id).status == "failed"
    store.close()


def test_under_the_wrapper_the_steps_join_its_run(monkeypatch):
    store = Store.open(database_path())
    run_id = store.create_run("wrapper", ["python", "train.py"], None)
    monkeypatch.setenv(ENV_RUN, str(run_id))
    monkeypatch.setenv(ENV_DB, str(store.path))
    with trainrig.monitor(flops_per_token=1e9, flush_interval_s=0.1) as m:
        for _ in m.data(range(3)):
            m.step(tokens=10)
    assert m.joined and m.run_id == run_id
    assert [r.id for r in store.runs()] == [run_id]  # no run of its own
    assert len(store.load(run_id).steps) == 3
    meta = store.meta(run_id)
    assert meta["workload:rank0"]["flops_per_token"] == 1e9
    assert store.run(run_id).status == "running"  # the wrapper closes it, not the job
    store.close()


@pytest.mark.parametrize(("options", "field"), [
    ({"hz": 20}, "hz"), ({"hz": 0.5}, "hz"), ({"model": "llama3-8b"}, "seq_len"),
    ({"flops_per_token": -1}, "flops_per_token"), ({"precision": "fp4"}, "precision"),
    ({"memory_limit_gib": 0}, "memory_limit_gib"), ({"peak_tflops": 0}, "peak_tflops"),
    ({"job": "/nonexistent/job.yaml"}, "job"),
])
def test_bad_input_names_the_argument(options, field):
    with pytest.raises(TrainrigError) as error:
        trainrig.monitor(**options)
    assert error.value.field.startswith(field)


def test_report_before_start_is_an_error():
    with pytest.raises(TrainrigError):
        trainrig.monitor().report()
