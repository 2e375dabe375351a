"""The server's limits, none of them timed: a fake worker that never answers stands for a request past its
limit, a client that never finishes stands for a trickling one, and each test waits for the server's answer
rather than measuring how long it took."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from trainrig.web.app import create_app, worker_pools
from trainrig.web.plan_worker import SearchUnavailable, WorkerPool
from trainrig.web.server import bound_socket, uvicorn_server
from trainrig.web.settings import Settings

from .conftest import SMALL_SEARCH

JOB = {"model": "llama3-8b", "hardware": {"gpu": "h100", "n_gpus": 8}, "training": {"zero": 1}}

# A worker that answers every request at once with its running count, except for model "slow" (never
# answers: a request past any limit), model "wait" (answers once the file `until` exists) and model "bad"
# (an input error). It imports nothing of trainrig, so it starts in milliseconds.
FAKE_CHILD = (sys.executable, "-S", "-c", textwrap.dedent("""
    import json, os, sys, time
    count = 0
    for line in sys.stdin:
        request = json.loads(line)
        arguments = request["arguments"]
        count += 1
        if arguments.get("model") == "slow":
            time.sleep(3600)
        while arguments.get("model") == "wait" and not os.path.exists(arguments["until"]):
            time.sleep(0.01)
        if arguments.get("model") == "bad":
            reply = {"input": ["model", f"bad {count}"]}
        else:
            reply = {"ok": {"task": request["task"], "count": count}}
        sys.stdout.write(json.dumps(reply) + "\\n")
        sys.stdout.flush()
"""))


def fake_pool(size: int = 1, max_queued: int = 0, timeout_s: float = 60, cache_entries: int = 8) -> WorkerPool:
    return WorkerPool("search", timeout_s, size, max_queued, narrow_hint="narrow it.", cache_entries=cache_entries,
                      child_command=FAKE_CHILD)


def with_fake_workers(app, settings: Settings):
    """`app` with both pools running the fake worker; the caller closes them."""
    app.state.plan_worker, app.state.request_pool = worker_pools(settings, child_command=FAKE_CHILD)
    return app.state.plan_worker, app.state.request_pool


def test_a_request_past_the_time_limit_is_stopped_with_a_422_and_the_next_one_runs():
    settings = Settings(plan_timeout_s=0.2, request_timeout_s=0.2)
    app = create_app(settings)
    plans, requests = with_fake_workers(app, settings)
    try:
        client = TestClient(app)
        slow = client.post("/api/plan", json={**SMALL_SEARCH, "model": "slow"})
        assert slow.status_code == 422, slow.text
        assert slow.json()["field"] == "search" and "0.2 s limit" in slow.json()["message"]
        plans.timeout_s = 60  # the next search has all the time it needs: nothing here depends on speed
        quick = client.post("/api/plan", json=SMALL_SEARCH)
        assert quick.status_code == 200 and quick.json()["task"] == "plan"
    finally:
        plans.close()
        requests.close()


@pytest.mark.parametrize("route", ["/api/estimate", "/api/fit", "/api/node", "/api/model"])
def test_every_computing_route_has_a_time_limit(route):
    settings = Settings(plan_timeout_s=60, request_timeout_s=0.2)
    app = create_app(settings)
    plans, requests = with_fake_workers(app, settings)
    try:
        body = {"model": "slow"} if route == "/api/model" else {**JOB, "model": "slow"}
        answer = TestClient(app).post(route, json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["field"] == "body" and "0.2 s limit" in answer.json()["message"]
    finally:
        plans.close()
        requests.close()


def _hold(pool: WorkerPool, until: Path, count: int) -> list[threading.Thread]:
    """`count` requests that wait in `pool` until the file `until` exists; returned once all are admitted."""
    threads = [threading.Thread(target=pool.run, args=("plan", {"model": "wait", "until": str(until), "n": n}))
               for n in range(count)]
    for thread in threads:
        thread.start()
    while pool._admitted._value > pool.size + pool.max_queued - count:  # noqa: SLF001 - until all are in
        time.sleep(0.01)
    return threads


def test_a_full_queue_answers_503_with_retry_after_at_once_and_estimates_still_answer(tmp_path):
    settings = Settings(max_parallel_plans=1, max_queued_plans=1)
    app = create_app(settings)
    plans, requests = with_fake_workers(app, settings)
    app.state.request_pool = worker_pools(settings)[1]  # real estimates, beside the fake searches
    release = tmp_path / "release"
    try:
        client = TestClient(app)
        held = _hold(plans, release, 2)  # one running, one waiting: the queue is full
        refused = client.post("/api/plan", json=SMALL_SEARCH)
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "30"
        assert refused.json()["field"] == "search" and "busy" in refused.json()["message"]
        estimated = client.post("/api/estimate", json=JOB)  # its own pool: not behind the searches
        assert estimated.status_code == 200, estimated.text
        release.touch()
        for thread in held:
            thread.join()
        assert client.post("/api/plan", json=SMALL_SEARCH).status_code == 200
    finally:
        release.touch()
        plans.close()
        requests.close()
        app.state.request_pool.close()


def test_a_repeated_request_is_answered_from_the_cache_whatever_its_key_order():
    pool = fake_pool(cache_entries=1)
    try:
        first = pool.run("plan", {"model": "m", "tokens": 1, "max_gpus": 8})
        assert pool.run("plan", {"max_gpus": 8, "tokens": 1, "model": "m"}) == first  # not computed again
        assert pool.run("compare", {"model": "m", "tokens": 1, "max_gpus": 8})["count"] == first["count"] + 1
        assert pool.run("plan", {"model": "m", "tokens": 1, "max_gpus": 8})["count"] == first["count"] + 2  # LRU
        with pytest.raises(Exception, match="bad 4"):
            pool.run("plan", {"model": "bad"})
        with pytest.raises(Exception, match="bad 5"):  # an input error is not kept: asked again, computed again
            pool.run("plan", {"model": "bad"})
    finally:
        pool.close()


def test_a_repeated_plan_gets_the_same_answer_measured_search_time_included(client):
    first = client.post("/api/plan", json={**SMALL_SEARCH, "top": 2})
    again = client.post("/api/plan", json={"top": 2, **SMALL_SEARCH})
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()  # search_time_s is a wall time: equal only when not searched again


def test_a_pool_with_no_queue_refuses_when_its_only_worker_is_busy(tmp_path):
    pool = fake_pool(size=1, max_queued=0, timeout_s=7)
    release = tmp_path / "release"
    try:
        held = _hold(pool, release, 1)
        with pytest.raises(SearchUnavailable, match="busy") as refused:
            pool.run("plan", {"model": "m"})
        assert refused.value.retry_after_s == 7
    finally:
        release.touch()
        for thread in held:
            thread.join()
        pool.close()


ENCODINGS = ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_body_not_in_utf8_is_refused_with_one_sentence(encoding):
    app = create_app()
    body = json.dumps(JOB).encode(encoding)
    answer = TestClient(app).post("/api/estimate", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "body" and "UTF-8" in answer.json()["message"]


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_body_with_a_number_json_does_not_have_is_refused(number):
    body = json.dumps(JOB).replace('"zero": 1', f'"zero": 1, "tokens": {number}')
    answer = TestClient(create_app()).post("/api/estimate", content=body,
                                           headers={"content-type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "body" and "finite" in answer.json()["message"]


# --- a real uvicorn server on a port, spoken to through raw sockets ---

HEAD = b"POST /api/estimate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


@pytest.fixture
def serve():
    """Start `trainrig serve`'s server (uvicorn with its protocol and limits) on a free port; its port."""
    servers = []

    def start(settings: Settings) -> int:
        listening = bound_socket("127.0.0.1", 0)
        server = uvicorn_server(create_app(settings), settings)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
        thread.start()
        servers.append((server, thread))
        while not server.started and thread.is_alive():
            time.sleep(0.01)
        return listening.getsockname()[1]

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(60)


def _read_to_close(connection: socket.socket) -> bytes:
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=60)


def _read_answer(connection: socket.socket) -> bytes:
    """One whole answer: its head, then as many bytes as its Content-Length says."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += connection.recv(65536) or b"<closed>\r\n\r\n"
    head, _, body = received.partition(b"\r\n\r\n")
    lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    length = lengths[0] if lengths else 0
    while len(body) < length and (chunk := connection.recv(65536)):
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.mark.parametrize("connection_header", [b"", b"Connection: close\r\n"], ids=["keep-alive", "close"])
def test_a_huge_declared_body_gets_a_413_not_a_connection_reset(serve, connection_header):
    port = serve(Settings(max_parallel_plans=1, max_parallel_requests=1))
    body = b" " * 50_000_000
    with _connect(port) as connection:
        connection.sendall(HEAD + b"Content-Length: %d\r\n" % len(body) + connection_header + b"\r\n" + body)
        answer = _read_answer(connection)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"1,000,000 bytes" in answer


def test_a_trickling_head_is_answered_408_and_closed(serve):
    port = serve(Settings(max_parallel_plans=1, max_parallel_requests=1, header_timeout_s=0.2))
    with _connect(port) as connection:
        connection.sendall(b"POST /api/estimate HTTP/1.1\r\nHo")  # and nothing more
        answer = _read_to_close(connection)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    with _connect(port) as silent:  # a connection that never sends a byte is closed too
        assert _read_to_close(silent) == b""


def test_a_trickling_body_is_answered_408_and_closed(serve):
    port = serve(Settings(max_parallel_plans=1, max_parallel_requests=1, body_timeout_s=0.2))
    with _connect(port) as connection:
        connection.sendall(HEAD + b"Content-Length: 100\r\n\r\n{\"model\"")  # 92 bytes short, for ever
        answer = _read_to_close(connection)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"0.2 s limit" in answer


def test_serve_on_a_busy_port_exits_2_naming_the_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "trainrig", "serve", "--port", str(port)],
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert str(port) in result.stderr and "already in use" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("option", "value"), [("--request-timeout-s", "0"), ("--request-timeout-s", "nan"),
                                               ("--plan-timeout-s", "inf")])
def test_serve_refuses_a_time_limit_that_is_not_a_positive_finite_number(option, value):
    result = subprocess.run([sys.executable, "-m", "trainrig", "serve", option, value], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert option.removeprefix("--").replace("-", "_") in result.stderr and "Traceback" not in result.stderr
