"""End to end on CPU: a small torch loop under `trainrig monitor`, planted faults diagnosed,
`trainrig runs` / `trainrig report` (JSON and HTML), and one-sentence errors (exit code 2)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainrig.monitor.home import database_path
from trainrig.monitor.store import Store

HERE = Path(__file__).parent
TRAIN = [sys.executable, str(HERE / "train_tiny.py")]


def trainrig(*args: str, check_rc: int | None = 0, timeout: int = 120) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "trainrig", *args], capture_output=True, text=True,
                            timeout=timeout, env={**os.environ})
    if check_rc is not None:
        assert result.returncode == check_rc, result.stdout + result.stderr
    return result


def monitored(*train_args: str, monitor_args: tuple[str, ...] = ()) -> dict:
    out = trainrig("monitor", "--hz", "10", "--json", *monitor_args, "--", *TRAIN, *train_args)
    return json.loads(out.stdout)


def test_a_torch_loop_under_the_monitor_records_steps_tokens_and_mfu():
    report = monitored("--steps", "40", "--device-s", "0.01", monitor_args=("--peak-tflops", "0.5"))
    steps = report["steps"]
    assert steps["steps"] == 40 and steps["measured_steps"] == 39
    store = Store.open(database_path())
    rows = [s for s in store.load(report["run"]["id"]).steps if s["step"] >= 1]
    expected_tokens_per_s = sum(r["tokens"] for r in rows) / sum(r["step_s"] for r in rows)
    assert steps["tokens_per_s"] == pytest.approx(expected_tokens_per_s)
    flops = report["workload"]["flops_per_token"]  # from the job's own monitor: 6 × parameters
    assert flops == 6 * (256 * 64 + 64 * 256 + 256 + 256 * 256 + 256)
    assert steps["mfu"] == pytest.approx(expected_tokens_per_s * flops / 1e12 / 0.5)
    assert report["workload"]["peak_source"] == "given"  # from --peak-tflops, merged
    assert report["run"]["status"] == "finished" and report["run"]["exit_code"] == 0
    assert report["samples"]["host"] >= 3 and report["sampler"]["errors"] == 0
    kinds = {f["kind"] for f in report["findings"]}
    assert not kinds & {"data_loading", "memory_pressure", "storage"}
    assert report["nvml_unavailable"]  # this machine has no GPU: said, not crashed
    listed = json.loads(trainrig("runs", "--json").stdout)
    assert listed[0]["id"] == report["run"]["id"] and listed[0]["steps"]["steps"] == 40
    again = json.loads(trainrig("report", "latest", "--json").stdout)
    assert again["steps"] == report["steps"] and again["findings"] == report["findings"]


def test_a_slow_data_loader_is_diagnosed_as_data_loading_bound():
    report = monitored("--steps", "30", "--slow-sample-s", "0.002")
    findings = {f["kind"]: f for f in report["findings"]}
    finding = findings["data_loading"]
    assert report["steps"]["data_wait_share"] > 0.5
    wait = finding["evidence"][0]
    assert wait["table"] == "steps" and wait["ids"] and wait["value"] > 0.3
    assert any("num_workers" in advice for advice in finding["advice"])
    assert "storage" not in findings


def test_a_memory_hungry_loop_raises_the_near_limit_finding():
    report = monitored("--steps", "60", "--device-s", "0.02", "--leak-mib", "12",
                       monitor_args=("--memory-limit-gib", "0.75"))
    finding = {f["kind"]: f for f in report["findings"]}["memory_pressure"]
    evidence = finding["evidence"][0]
    assert evidence["metric"] == "job_rss_share" and evidence["value"] >= 0.9
    assert evidence["table"] == "host_samples" and len(evidence["ids"]) >= 2
    assert report["host"]["memory_limit_source"] == "declared memory limit"


def test_the_commands_exit_code_is_kept(tmp_path):
    result = trainrig("monitor", "--hz", "5", "--no-live", "--", sys.executable, "-c",
                      "import sys; sys.exit(3)", check_rc=3)
    assert "run" in result.stdout
    run = json.loads(trainrig("runs", "--json").stdout)[0]
    assert run["status"] == "failed" and run["exit_code"] == 3


def test_html_report_is_self_contained_with_plots(tmp_path):
    monitored("--steps", "20", "--slow-sample-s", "0.002")
    page = tmp_path / "run.html"
    trainrig("report", "latest", "--html", str(page))
    text = page.read_text()
    assert text.count("<svg") >= 3 and "data_loading" in text
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?:", text)  # no CDN, no remote assets
    assert "<script" not in text and "<link" not in text


@pytest.mark.parametrize(("args", "field"), [
    (("monitor",), "COMMAND"),
    (("monitor", "--hz", "50", "--", "true"), "--hz"),
    (("monitor", "--pid", "1", "--", "true"), "COMMAND"),
    (("monitor", "--job", "/nonexistent.yaml", "--", "true"), "--job"),
    (("monitor", "--peak-tflops", "-1", "--", "true"), "--peak-tflops"),
    (("monitor", "--gpus", "a,b", "--", "true"), "--gpus"),
    (("monitor", "--", "/nonexistent/program"), "COMMAND"),
    (("report", "nope"), "RUN"),
    (("report", "12345"), "RUN"),
    (("runs", "--limit", "0"), "--limit"),
    # issue 13, items 4, 9, 10
    (("monitor", "--prometheus", "70000", "--", "true"), "--prometheus"),
    (("monitor", "--prometheus", "-1", "--", "true"), "--prometheus"),
    (("monitor", "--prometheus", "9100", "--prometheus-host", " ", "--", "true"),
     "--prometheus-host"),
    (("monitor", "--pid", "1", "--duration", "nan"), "--duration"),
    (("monitor", "--pid", "1", "--duration", "inf"), "--duration"),
    (("monitor", "--memory-limit-gib", "inf", "--", "true"), "--memory-limit-gib"),
    (("monitor", "--memory-limit-gib", "nan", "--", "true"), "--memory-limit-gib"),
    (("monitor", "--peak-tflops", "nan", "--", "true"), "--peak-tflops"),
    (("monitor", "--flops-per-token", "inf", "--", "true"), "--flops-per-token"),
    (("runs", "--limit", str(2**63)), "--limit"),
    (("report", str(2**63)), "RUN"),
    (("report", "latest", "--html", str(HERE)), "--html"),
    (("report", "latest", "--html", "/proc/trainrig-report.html"), "--html"),
])
def test_bad_input_is_one_sentence_and_exit_code_2(args, field):
    result = trainrig(*args, check_rc=2)
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in result.stderr
    assert any(field in line for line in lines), result.stderr
    assert lines[-1].startswith("error:") and field in lines[-1], result.stderr  # one sentence, last


def test_attach_to_a_running_process_with_a_job_estimate():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        job = Path(__file__).parents[2] / "examples" / "llama3-8b-8xh100.yaml"
        result = trainrig("monitor", "--pid", str(sleeper.pid), "--duration", "1.5", "--hz", "5",
                          "--job", str(job), "--json")
    finally:
        sleeper.kill()
        sleeper.wait()
    report = json.loads(result.stdout)
    assert report["run"]["command"][-1] == "import time; time.sleep(30)"
    assert report["run"]["name"] == f"pid {sleeper.pid}"
    assert report["samples"]["host"] >= 3
    store = Store.open(database_path())
    rows = store.load(report["run"]["id"]).host_samples
    assert all(r["job_processes"] == 1 for r in rows[1:])
    import trainrig as api

    estimate = api.estimate(api.load_job(str(job)))
    assert report["vs_estimate"]["estimated_step_time_s"] == pytest.approx(estimate.step_time_s)
    assert report["vs_estimate"]["message"].endswith("no measured steps")
