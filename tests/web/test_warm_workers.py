"""The search processes start warm and a poll can wait for its job's end (issue 16, speed): a warmed-up child
answers exactly what it answers cold and what the CLI prints, its warm-up writes nothing on the pipe, a broken
warm-up costs nothing but speed, and a waiting poll comes back with the job's end. Nothing here is timed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from trainrig.web import jobs, search_child
from trainrig.web.app import worker_pools
from trainrig.web.jobs import SearchJob
from trainrig.web.plan_worker import CHILD_COMMAND
from trainrig.web.settings import Settings

from .conftest import SMALL_SEARCH, SMALL_SEARCH_FLAGS, cli_json

ROOT = Path(__file__).resolve().parents[2]
PLAN = {"model": "gpt3-350m", "tokens": 1e10, "gpu_types": ["H100-SXM5-80GB", "A100-SXM4-80GB"], "max_gpus": 16,
        "deadline_days": 30, "seq_len": 2048, "global_batch": 256}
PLAN_FLAGS = ["--model", "gpt3-350m", "--tokens", "1e10", "--gpus", "H100-SXM5-80GB,A100-SXM4-80GB", "--max-gpus",
              "16", "--deadline-days", "30", "--seq-len", "2048", "--global-batch", "256"]


def _child_answers(warm_up: str | None, requests: list[dict]) -> list[str]:
    """Every line a search child writes for these requests, started as the server starts it."""
    command = [*CHILD_COMMAND, *(["--warm-up", warm_up] if warm_up else [])]
    done = subprocess.run(command, input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def _without_time(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "search_time_s"}


def test_the_pools_start_their_children_with_their_warm_up():
    plans, requests = worker_pools(Settings())
    assert plans.child_command == (*CHILD_COMMAND, "--warm-up", "search")
    assert requests.child_command == (*CHILD_COMMAND, "--warm-up", "requests")
    assert set(search_child.WARM_UPS) == {"search", "requests"}
    assert all(task in search_child.TASKS for tasks in search_child.WARM_UPS.values() for task, _ in tasks)


def test_a_warmed_up_search_child_answers_as_a_cold_one_and_as_the_cli():
    requests = [{"task": "plan", "arguments": PLAN},
                {"task": "plan", "arguments": {**PLAN, "deadline_days": 20}, "progress": True}]
    warm = _child_answers("search", requests)
    cold = _child_answers(None, requests)
    answers = [json.loads(line) for line in warm if not line.startswith('{"progress"')]
    assert len(answers) == 2 and json.loads(warm[0]) == answers[0]  # nothing of the warm-up on the pipe
    assert [_without_time(a["ok"]) for a in answers] == [
        _without_time(json.loads(line)["ok"]) for line in cold if not line.startswith('{"progress"')]
    assert _without_time(answers[0]["ok"]) == _without_time(cli_json("plan", *PLAN_FLAGS))
    assert _without_time(answers[1]["ok"]) == _without_time(cli_json("plan", *PLAN_FLAGS[:-6], "--deadline-days",
                                                                     "20", *PLAN_FLAGS[-4:]))


def test_a_warmed_up_request_child_answers_an_estimate_as_the_cli(tmp_path):
    job = {"model": "llama3-8b", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 8}, "training": {"zero": 3}}
    (line,) = _child_answers("requests", [{"task": "estimate", "arguments": job}])
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    assert json.loads(line)["ok"] == cli_json("estimate", str(path))


def test_a_failing_or_unknown_warm_up_is_ignored(monkeypatch, capsys):
    def broken(arguments):
        raise RuntimeError("broken")

    monkeypatch.setitem(search_child.TASKS, "plan", broken)
    monkeypatch.setitem(search_child.TASKS, "search_check", broken)
    search_child.warm_up("search")
    search_child.warm_up("no-such-pool")
    assert capsys.readouterr().out == ""


def test_a_waiting_poll_comes_back_with_the_jobs_end(monkeypatch):
    monkeypatch.setattr(jobs, "MAX_POLL_WAIT_S", 3600.0)  # the poll waits for the end, however slow the machine
    job = SearchJob(id="x", task="plan")
    finisher = threading.Timer(0.05, job.finish, args=("done",),
                               kwargs={"result": {"n_configurations_evaluated": 10, "plans": []}})
    finisher.start()  # the search's thread, finishing while the poll waits (or before: the same answer)
    assert asyncio.run(job.ended_within(3600)) is True
    assert job.view()["status"] == "done" and job.view()["evaluated"] == 10


def test_a_poll_on_a_running_job_answers_with_its_progress_once_the_wait_has_passed():
    job = SearchJob(id="x", task="plan")
    job._started()
    job._progress(5, 10)
    assert asyncio.run(job.ended_within(0.01)) is False
    assert job.view()["status"] == "running" and job.view()["evaluated"] == 5
    job.finish("cancelled")
    assert asyncio.run(job.ended_within(jobs.MAX_POLL_WAIT_S)) is True  # ended: nothing to wait for


def test_the_poll_wait_is_bounded_and_checked(client):
    created = client.post("/api/plan/jobs", json={**SMALL_SEARCH, "deadline_days": 9}).json()
    path = f"/api/plan/jobs/{created['id']}"
    for _ in range(600):  # waiting polls, as the page sends them, until the job ends
        state = client.get(f"{path}?wait_s=1").json()
        if state["status"] in jobs.FINISHED:
            break
    assert state["status"] == "done"
    expected = cli_json("plan", *SMALL_SEARCH_FLAGS, "--deadline-days", "9")
    assert _without_time(state["result"]) == _without_time(expected)
    for bad in ("-1", "1e9", "soon"):
        refused = client.get(f"{path}?wait_s={bad}")
        assert refused.status_code == 422 and refused.json()["field"] == "wait_s", refused.text


@pytest.mark.parametrize("route", ["/api/plan/jobs/{job_id}", "/api/compare/jobs/{job_id}"])
def test_the_schema_documents_the_wait(client, route):
    parameters = client.get("/openapi.json").json()["paths"][route]["get"]["parameters"]
    wait = next(p for p in parameters if p["name"] == "wait_s")
    assert wait["in"] == "query" and wait["schema"]["maximum"] == jobs.MAX_POLL_WAIT_S
