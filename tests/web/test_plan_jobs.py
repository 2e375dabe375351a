"""Plans as jobs (issue 14): `POST /api/plan/jobs` answers at once with an id, GET polls the progress and at
the end holds what `/api/plan` answers, an identical request is done at once from the cache, DELETE cancels a
running search and the pool keeps serving. No assertion here depends on how fast the machine is: each test
waits for a state, never for a time."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from trainrig.web.app import create_app
from trainrig.web.jobs import FINISHED, JobStore
from trainrig.web.plan_worker import SearchCancelled, SearchTooLong
from trainrig.web.settings import Settings

from .conftest import SMALL_SEARCH, SMALL_SEARCH_FLAGS, cli_json

# Millions of configurations: a search that is still running when the test cancels it, on any machine
LARGE_SEARCH = {"model": "llama3-8b", "tokens": 1e12, "max_gpus": 16384, "global_batch": "256-4096"}
MOST_POLLS = 6000  # a bound on waiting (10 minutes at 0.1 s), so a broken server fails instead of hanging


def _wait(client, path: str, until) -> dict:
    """Poll `path` until `until(state)` holds; the state then."""
    for _ in range(MOST_POLLS):
        state = client.get(path).json()
        if until(state):
            return state
        time.sleep(0.1)
    pytest.fail(f"{path} never reached the state waited for; last: {state}")


def _finished(state: dict) -> bool:
    return state["status"] in FINISHED


def _without_time(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "search_time_s"}


def test_a_plan_job_runs_to_the_answer_plan_gives_and_counts_its_configurations(client):
    body = {**SMALL_SEARCH, "deadline_days": 3, "top": 3}
    created = client.post("/api/plan/jobs", json=body)
    assert created.status_code == 202, created.text
    job = created.json()
    assert job["status"] in ("queued", "running", "done") and created.headers["location"].endswith(job["id"])
    state = _wait(client, f"/api/plan/jobs/{job['id']}", _finished)
    assert state["status"] == "done" and state["error"] is None and state["elapsed_s"] >= 0
    result = state["result"]
    assert state["evaluated"] == state["total"] == result["n_configurations_evaluated"] > 0
    assert client.post("/api/plan", json=body).json() == result  # the same answer, from the same cache
    expected = cli_json("plan", *SMALL_SEARCH_FLAGS, "--deadline-days", "3", "--top", "3")
    assert _without_time(result) == _without_time(expected)


def test_an_identical_request_is_done_at_once_from_the_cache_whatever_its_key_order(client):
    body = {**SMALL_SEARCH, "deadline_days": 4}
    first = client.post("/api/plan/jobs", json=body).json()
    done = _wait(client, f"/api/plan/jobs/{first['id']}", _finished)
    assert first["cached"] is False and done["cached"] is False
    again = client.post("/api/plan/jobs", json=dict(reversed(list(body.items()))))
    assert again.status_code == 202
    assert again.json()["status"] == "done" and again.json()["cached"] is True
    state = client.get(f"/api/plan/jobs/{again.json()['id']}").json()
    assert state["result"] == done["result"] and state["cached"] is True
    other = client.post("/api/plan/jobs", json={**body, "deadline_days": 5}).json()
    assert other["cached"] is False  # a different request is searched again


def test_a_running_search_is_cancelled_and_the_pool_keeps_serving(client):
    job = client.post("/api/plan/jobs", json=LARGE_SEARCH).json()
    path = f"/api/plan/jobs/{job['id']}"
    running = _wait(client, path, lambda s: s["status"] != "queued")
    assert running["status"] == "running", running
    cancelled = client.delete(path)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["result"] is None
    assert client.get(path).json()["status"] == "cancelled"  # and it stays so: the answer never comes
    assert client.delete(path).json()["status"] == "cancelled"
    answer = client.post("/api/plan", json={**SMALL_SEARCH, "deadline_days": 6})
    assert answer.status_code == 200, answer.text
    fresh = client.post("/api/plan/jobs", json={**SMALL_SEARCH, "deadline_days": 7}).json()
    assert _wait(client, f"/api/plan/jobs/{fresh['id']}", _finished)["status"] == "done"


def test_progress_is_reported_while_a_search_runs(client):
    job = client.post("/api/plan/jobs", json={**LARGE_SEARCH, "max_gpus": 8192}).json()
    path = f"/api/plan/jobs/{job['id']}"
    counted = _wait(client, path, lambda s: s["total"] is not None or _finished(s))
    client.delete(path)
    assert counted["status"] == "running" and counted["total"] > 0
    assert 0 <= counted["evaluated"] <= counted["total"]


@pytest.mark.parametrize("bad", [{"gpus": ["no-such-gpu"]}, {"model": ""}, {"objective": "cheapest"},
                                 {"max_gpus": 0}, {"model": "/etc/passwd"}])
def test_bad_input_is_refused_at_once_with_the_error_plan_gives(client, bad):
    body = {**SMALL_SEARCH, **bad}
    refused = client.post("/api/plan/jobs", json=body)
    direct = client.post("/api/plan", json=body)
    assert refused.status_code == direct.status_code == 422
    assert refused.json() == direct.json() and refused.json()["field"] == next(iter(bad))


def test_unknown_ids_are_a_404_in_the_usual_shape(client):
    for method in ("get", "delete"):
        answer = getattr(client, method)("/api/plan/jobs/no-such-job")
        assert answer.status_code == 404
        assert answer.json()["field"] == "id" and "POST /api/plan/jobs" in answer.json()["message"]
    plan_job = client.post("/api/plan/jobs", json=SMALL_SEARCH).json()
    assert client.get(f"/api/compare/jobs/{plan_job['id']}").status_code == 404  # a plan job is no compare job


def test_compare_and_best_per_gpu_type_jobs_answer_as_their_routes(client):
    body = {**SMALL_SEARCH, "gpus": ["H100-SXM5-80GB", "A100-SXM4-80GB"]}
    job = client.post("/api/compare/jobs", json=body).json()
    state = _wait(client, f"/api/compare/jobs/{job['id']}", _finished)
    assert state["status"] == "done" and client.post("/api/compare", json=body).json() == state["result"]

    job = client.post("/api/plan/jobs?per_gpu_type=true", json=body).json()
    state = _wait(client, f"/api/plan/jobs/{job['id']}", _finished)
    gpus = [p["gpu"] for p in state["result"]["plans"]]
    assert len(gpus) == len(set(gpus)) == 2
    assert client.post("/api/plan?per_gpu_type=true", json=body).json() == state["result"]
    overall = client.post("/api/plan", json=body).json()
    assert overall != state["result"]  # without the option: the best overall, not one per type


def test_a_full_pool_refuses_a_new_job_with_503_and_retry_after():
    settings = Settings(plan_timeout_s=300, request_timeout_s=120, max_parallel_plans=1, max_queued_plans=0)
    with TestClient(create_app(settings)) as busy:
        (child,) = list(busy.app.state.plan_worker._idle.queue)  # the pool's one search process
        first = busy.post("/api/plan/jobs", json=LARGE_SEARCH).json()
        refused = busy.post("/api/plan/jobs", json={**LARGE_SEARCH, "max_gpus": 8192})
        assert refused.status_code == 503
        assert int(refused.headers["retry-after"]) >= 1 and refused.json()["field"] == "search"
        _wait(busy, f"/api/plan/jobs/{first['id']}", lambda s: s["status"] == "running")
        assert busy.delete(f"/api/plan/jobs/{first['id']}").json()["status"] == "cancelled"
        for _ in range(MOST_POLLS):  # the cancelled search gives its place back once its child is stopped
            accepted = busy.post("/api/plan/jobs", json=SMALL_SEARCH)
            if accepted.status_code != 503:
                break
            time.sleep(0.1)
        assert accepted.status_code == 202
        assert child.process.poll() is not None  # the cancelled search's process was stopped, and replaced
        assert _wait(busy, f"/api/plan/jobs/{accepted.json()['id']}", _finished)["status"] == "done"


# ---- the job store on its own, over a pool that computes nothing -----------------------------------------


class _Pool:
    """A WorkerPool's face as JobStore sees it: answers and failures on demand, no processes."""

    def __init__(self, cached=None, outcome=None):
        self.cached_answer, self.outcome = cached, outcome
        self.admitted = 0
        self.release_seen = threading.Event()

    def cached(self, task, arguments):
        return self.cached_answer

    def admit(self):
        self.admitted += 1

    def release(self):
        self.admitted -= 1
        self.release_seen.set()

    def compute(self, task, arguments, hooks):
        hooks.on_start()
        hooks.on_progress(5, 10)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def _finish(store: JobStore, job):
    store.pool.release_seen.wait(timeout=60)
    return job.view()


def test_a_search_past_the_limit_says_what_the_person_at_the_page_can_do():
    store = JobStore(_Pool(outcome=SearchTooLong("search", "took longer … --plan-timeout-s", 30.0)), max_jobs=8)
    view = _finish(store, store.submit("plan", {"model": "x"}))
    assert view["status"] == "failed" and view["error"]["field"] == "search"
    message = view["error"]["message"]
    assert "30 s" in message and "fewer GPU types" in message
    assert "--plan-timeout-s" not in message and "restart" not in message and "server with" not in message
    assert store.pool.admitted == 0


def test_a_job_cancelled_while_its_answer_arrives_stays_cancelled_and_gives_its_place_back():
    store = JobStore(_Pool(outcome=SearchCancelled()), max_jobs=8)
    job = store.submit("plan", {"model": "x"})
    assert store.cancel("plan", job.id).status == "cancelled"
    view = _finish(store, job)
    assert view["status"] == "cancelled" and store.pool.admitted == 0


def test_the_store_keeps_at_most_max_jobs_dropping_the_oldest_finished():
    store = JobStore(_Pool(cached={"n_configurations_evaluated": 3, "plans": []}), max_jobs=2)
    jobs = [store.submit("plan", {"model": "x", "n": n}) for n in range(3)]
    assert all(job.status == "done" and job.cached for job in jobs)
    assert store.get("plan", jobs[0].id) is None
    assert [store.get("plan", job.id) for job in jobs[1:]] == jobs[1:]
    assert jobs[2].view()["evaluated"] == jobs[2].view()["total"] == 3
