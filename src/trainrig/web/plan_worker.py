"""The API's computations in child processes, so a request over its time limit can be stopped.

Estimates and searches are pure CPU work in numpy; a thread cannot be interrupted, a process can. A
`WorkerPool` keeps a few `python -m trainrig.web.search_child` processes waiting with trainrig and the
catalog loaded; each takes one JSON request per line on stdin and answers one JSON line on stdout. The
server has two pools: one for plan and compare searches, one for estimate, fit, node and model, so a
quick request never waits behind a search.

A pool admits at most `size + max_queued` requests at once; one more gets a 503 with Retry-After at
once, without holding a thread. A child still working at the limit (waiting for a free child included)
is killed and replaced, and the request gets a 422 that names the limit: it asks for more than the
server allows, as a body over the size cap does. An identical request seen before (same task, same
normalized arguments) is answered from a bounded least-recently-used cache of answers.

A caller that holds an admission of its own (`admit`, then `compute` with `SearchHooks`: a plan job in
`web.jobs`) also hears the search's progress lines and can cancel it: the child is then killed and
replaced, like one past the limit, so the pool keeps its size.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainrig.catalog.registry import CATALOG_ENV
from trainrig.errors import TrainrigError

__all__ = ["WorkerPool", "SearchUnavailable", "SearchTooLong", "SearchCancelled", "SearchHooks", "CHILD_COMMAND",
           "request_key"]

# -P: the server's working directory does not go on the child's import path
CHILD_COMMAND = (sys.executable, "-P", "-m", "trainrig.web.search_child")
REQUESTS_PER_CHILD = 200
"""A child is replaced after this many requests, so nothing it accumulates lives forever."""
CANCEL_POLL_S = 0.05
"""How often a cancellable request looks at its cancel flag while it waits for a child or an answer."""
log = logging.getLogger("trainrig.web")


class SearchUnavailable(Exception):
    """The server is busy, or the worker process died without an answer: a 503 for the client."""

    def __init__(self, message: str, retry_after_s: int | None = None, field: str | None = None) -> None:
        self.message = message
        self.retry_after_s = retry_after_s
        """Seconds for the Retry-After header, when waiting would help."""
        self.field = field
        super().__init__(message)


class SearchTooLong(TrainrigError):
    """The request passed the time limit: it asks for more than this server allows (a 422)."""

    def __init__(self, field: str, message: str, limit_s: float = 0.0) -> None:
        super().__init__(field, message)
        self.limit_s = limit_s


class SearchCancelled(Exception):
    """The request was cancelled (`SearchHooks.cancelled`); its child was killed and replaced."""


@dataclass
class SearchHooks:
    """What a cancellable request hears of its search, and the flag that stops it."""

    cancelled: threading.Event = field(default_factory=threading.Event)
    on_start: Callable[[], None] = lambda: None
    """Called when a child takes the request (it stops waiting in the queue)."""
    on_progress: Callable[[int, int], None] = lambda evaluated, total: None
    """Called with each progress line: configurations evaluated so far, and in all."""


class WorkerPool:
    """Runs tasks in `size` child processes with a wall-time limit, a bounded queue and a result cache."""

    def __init__(self, field: str, timeout_s: float, size: int, max_queued: int, *, narrow_hint: str,
                 cache_entries: int = 128, child_command: Sequence[str] = CHILD_COMMAND, niceness: int = 0,
                 warm_up: str | None = None) -> None:
        self.field = field
        """What a refusal names: `search` for plan/compare, `body` for the other routes."""
        self.timeout_s = timeout_s
        self.size = size
        self.max_queued = max_queued
        self.narrow_hint = narrow_hint
        self.child_command = tuple(child_command) + (("--warm-up", warm_up) if warm_up else ())
        """The children's command; with `warm_up` (`search` or `requests`), each child runs that pool's warm-up
        requests before its first real one (`search_child.warm_up`), so no person's request pays for it."""
        self.niceness = niceness
        """Added to the children's nice value: searches yield the CPU to the quick routes' children."""
        self._admitted = threading.BoundedSemaphore(size + max_queued)
        self._idle: queue.Queue[_Child | None] = queue.Queue()
        self._cache = _AnswerCache(cache_entries)
        self._started = threading.Lock()
        self._children_started = False

    @property
    def retry_after_s(self) -> int:
        """What a refusal tells the client to wait: a busy child is done within one time limit."""
        return max(1, math.ceil(self.timeout_s))

    def start(self) -> None:
        """Start the children now (at server start), so the first request does not wait for imports."""
        with self._started:
            if not self._children_started:
                for _ in range(self.size):
                    self._idle.put(self._new_child())
                self._children_started = True

    def close(self) -> None:
        """Stop the idle children (at server shutdown); a later request starts new ones."""
        with self._started:
            self._children_started = False
        while True:
            try:
                child = self._idle.get_nowait()
            except queue.Empty:
                return
            if child is not None:
                child.kill()

    def run(self, task: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The task's JSON answer; a TrainrigError for bad input or a request past the limit;
        SearchUnavailable when the queue is full, no child freed up in time, or a child died."""
        cached = self.cached(task, arguments)
        if cached is not None:
            return cached
        self.admit()
        try:
            return self.compute(task, arguments)
        finally:
            self.release()

    def cached(self, task: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """The answer of an identical request computed before, if it is still kept."""
        line = self._cache.get(request_key(task, arguments))
        return None if line is None else _answer(line)

    def admit(self) -> None:
        """Take one of the `size + max_queued` places, or refuse at once (SearchUnavailable, a 503)."""
        if not self._admitted.acquire(blocking=False):
            raise SearchUnavailable(f"{self.field}: the server is busy ({self.size} running and {self.max_queued} "
                                    f"waiting, its limit); try again in {self.retry_after_s} s.", self.retry_after_s,
                                    self.field)

    def release(self) -> None:
        """Give back the place `admit` took."""
        self._admitted.release()

    def compute(self, task: str, arguments: dict[str, Any], hooks: SearchHooks | None = None) -> dict[str, Any]:
        """The answer, computed by a child (the caller holds an admission) and kept in the cache; with
        `hooks`, the search reports its progress and stops (SearchCancelled) once `hooks.cancelled` is set."""
        request = {"task": task, "arguments": arguments, **({"progress": True} if hooks is not None else {})}
        line = self._ask(json.dumps(request), time.monotonic() + self.timeout_s, hooks)
        answer = _answer(line)  # raises for bad input: those answers are not kept
        self._cache.put(request_key(task, arguments), line)
        return answer

    def _ask(self, request: str, deadline_s: float, hooks: SearchHooks | None = None) -> str:
        self.start()
        child = self._take(deadline_s, hooks)
        if hooks is not None:
            hooks.on_start()
        try:
            line = child.ask(request, deadline_s, hooks)
        except BaseException:
            self._idle.put(self._new_child(child))
            raise
        if line is None:  # past the deadline: the child was killed
            self._idle.put(self._new_child())
            raise SearchTooLong(self.field, f"took longer than this server's {self.timeout_s:g} s limit and was "
                                            f"stopped; {self.narrow_hint}", self.timeout_s)
        self._idle.put(child if child.requests < REQUESTS_PER_CHILD else self._new_child(child))
        return line

    def _take(self, deadline_s: float, hooks: SearchHooks | None = None) -> _Child:
        while True:
            remaining_s = max(0.0, deadline_s - time.monotonic())
            try:
                child = self._idle.get(timeout=remaining_s if hooks is None else min(remaining_s, CANCEL_POLL_S))
                break
            except queue.Empty:
                if hooks is not None and hooks.cancelled.is_set():
                    raise SearchCancelled from None
                if hooks is None or time.monotonic() >= deadline_s:
                    raise SearchUnavailable(f"{self.field}: the server is busy and no worker freed up within the "
                                            f"{self.timeout_s:g} s limit; try again shortly.", self.retry_after_s,
                                            self.field) from None
        return child if child is not None and child.alive() else self._new_child(child)

    def _new_child(self, old: _Child | None = None) -> _Child:
        if old is not None:
            old.kill()
        return _Child(self.child_command, self.niceness)


class _AnswerCache:
    """The last `entries` answer lines by request key, least recently used dropped first; thread-safe."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._lines: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            line = self._lines.get(key)
            if line is not None:
                self._lines.move_to_end(key)
            return line

    def put(self, key: str, line: str) -> None:
        if self.entries < 1:
            return
        with self._lock:
            self._lines[key] = line
            self._lines.move_to_end(key)
            while len(self._lines) > self.entries:
                self._lines.popitem(last=False)


class _Child:
    """One worker process and the thread that reads its answers."""

    def __init__(self, command: tuple[str, ...], niceness: int = 0) -> None:
        # cwd: an empty directory, so a catalog name the loaders also try as a relative path finds no file
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        encoding="utf-8", bufsize=1, cwd=_empty_directory(), env=_child_environment())
        if niceness:
            with contextlib.suppress(OSError):  # a lower priority is a courtesy, not a requirement
                os.setpriority(os.PRIO_PROCESS, self.process.pid, niceness)
        self.requests = 0
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with self.process.stdout:
            for line in self.process.stdout:
                self._lines.put(line)
        self._lines.put(None)

    def alive(self) -> bool:
        return self.process.poll() is None

    def ask(self, request: str, deadline_s: float, hooks: SearchHooks | None = None) -> str | None:
        """The answer line to one request, None past the deadline (the child is then killed). Progress
        lines go to `hooks`; once `hooks.cancelled` is set the child is killed and SearchCancelled raised."""
        self.requests += 1
        try:
            self.process.stdin.write(request + "\n")
            self.process.stdin.flush()
        except OSError:
            raise SearchUnavailable(_DIED) from None
        while True:
            if hooks is not None and hooks.cancelled.is_set():
                self.kill()
                raise SearchCancelled
            remaining_s = max(0.0, deadline_s - time.monotonic())
            try:
                line = self._lines.get(timeout=remaining_s if hooks is None else min(remaining_s, CANCEL_POLL_S))
            except queue.Empty:
                if hooks is None or time.monotonic() >= deadline_s:
                    self.kill()
                    return None
                continue
            if line is None:
                raise SearchUnavailable(_DIED)
            if not line.startswith('{"progress"'):
                return line
            if hooks is not None:
                hooks.on_progress(*json.loads(line)["progress"])

    def kill(self) -> None:
        """Stop the process; its reader thread ends at the end of its output."""
        self.process.kill()
        self.process.wait()
        with contextlib.suppress(OSError):  # a broken pipe: the process is gone anyway
            self.process.stdin.close()


_worker_directory: list[str] = []


def _empty_directory() -> str:
    """A private empty directory for the children to run in, removed when the server exits; made again if
    something else removed it meanwhile (a /tmp cleaner), so a child can always be started."""
    if not _worker_directory or not os.path.isdir(_worker_directory[0]):
        path = tempfile.mkdtemp(prefix="trainrig-worker-")
        atexit.register(shutil.rmtree, path, True)
        _worker_directory[:] = [path]
    return _worker_directory[0]


def _child_environment() -> dict[str, str]:
    """The server's environment, with the catalog directories made absolute (the children run elsewhere)."""
    environment = dict(os.environ)
    directories = [d for d in environment.get(CATALOG_ENV, "").split(os.pathsep) if d]
    if directories:
        environment[CATALOG_ENV] = os.pathsep.join(str(Path(d).expanduser().absolute()) for d in directories)
    return environment


_DIED = "request: the worker process ended without an answer (out of memory?); make the request smaller."


def request_key(task: str, arguments: dict[str, Any]) -> str:
    """The cache key: the task and its arguments as canonical JSON (keys sorted, no spaces)."""
    return json.dumps([task, arguments], sort_keys=True, separators=(",", ":"))


def _answer(line: str) -> dict[str, Any]:
    message = json.loads(line)
    if "ok" in message:
        return message["ok"]
    if "input" in message:
        field, text = message["input"]
        raise TrainrigError(field, text)
    raise RuntimeError(f"the worker failed:\n{message.get('crash', message)}")
