"""Plan and compare searches in child processes, so a search over its time limit can be stopped.

The search is pure CPU work in numpy; a thread cannot be interrupted, a process can. A small pool of
`python -m trainrig.web.search_child` processes (one per parallel search allowed) wait with trainrig
and the catalog loaded; each takes one JSON request per line on stdin and answers one JSON line on
stdout: the JSON of `plan`/`compare`, or the input error. A child still searching at the limit is
killed and replaced, and the request gets a 422 that names the limit and what to narrow: it asks for
more than the server allows, as a body over the size cap does. Waiting for a free child counts against
the same limit; when none frees up in time the server is busy (503), as it is when a child dies.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import subprocess
import sys
import threading
import time
from typing import Any

from trainrig.errors import TrainrigError
from trainrig.plan.planner import Planner

__all__ = ["PlanWorker", "SearchUnavailable", "SearchTooLong", "SEARCHES"]

SEARCHES = ("plan", "compare")
# -P: the server's working directory does not go on the child's import path
CHILD_COMMAND = (sys.executable, "-P", "-m", "trainrig.web.search_child")
SEARCHES_PER_CHILD = 200
"""A child is replaced after this many searches, so nothing it accumulates lives forever."""
log = logging.getLogger("trainrig.web")


class SearchUnavailable(Exception):
    """The server is busy, or the search process died without an answer: a 503 for the client."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class SearchTooLong(TrainrigError):
    """The search passed the time limit: the request asks for more than this server allows (a 422)."""


class PlanWorker:
    """Runs `plan`/`compare` with a wall-time limit, at most `max_parallel` at once."""

    def __init__(self, timeout_s: float, max_parallel: int) -> None:
        self.timeout_s = timeout_s
        self.max_parallel = max_parallel
        self._idle: queue.Queue[_Child | None] = queue.Queue()
        self._started = threading.Lock()
        self._children_started = False

    def start(self) -> None:
        """Start the children now (at server start), so the first search does not wait for imports."""
        with self._started:
            if not self._children_started:
                for _ in range(self.max_parallel):
                    self._idle.put(_Child())
                self._children_started = True

    def close(self) -> None:
        """Stop the idle children (at server shutdown); a later search starts new ones."""
        with self._started:
            self._children_started = False
        while True:
            try:
                child = self._idle.get_nowait()
            except queue.Empty:
                return
            if child is not None:
                child.kill()

    def run(self, search: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The search's JSON answer; a TrainrigError for bad input or a search past the limit;
        SearchUnavailable when the server is busy or a child died."""
        if search not in SEARCHES:
            raise ValueError(f"unknown search {search!r}")
        Planner.create(**arguments)  # the request's checks, here: bad input gets its 422 at once
        self.start()
        deadline_s = time.monotonic() + self.timeout_s
        child = self._take(deadline_s)
        try:
            line = child.ask(json.dumps({"search": search, "arguments": arguments}), deadline_s)
        except BaseException:
            self._idle.put(child.replaced())
            raise
        if line is None:  # past the deadline: the child was killed
            self._idle.put(_Child())
            raise SearchTooLong("search", f"took longer than this server's {self.timeout_s:g} s limit and was "
                                          "stopped; narrow it (fewer gpus types, a smaller max_gpus or global_batch "
                                          "range) or start the server with a larger --plan-timeout-s.")
        self._idle.put(child if child.searches < SEARCHES_PER_CHILD else child.replaced())
        return _answer(line)

    def _take(self, deadline_s: float) -> _Child:
        try:
            child = self._idle.get(timeout=max(0.0, deadline_s - time.monotonic()))
        except queue.Empty:
            raise SearchUnavailable(f"search: the server is busy with other searches and none finished within "
                                    f"the {self.timeout_s:g} s limit; try again shortly.") from None
        return child if child is not None and child.alive() else _Child()


class _Child:
    """One search process and the thread that reads its answers."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(CHILD_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, encoding="utf-8", bufsize=1)
        self.searches = 0
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with self.process.stdout:
            for line in self.process.stdout:
                self._lines.put(line)
        self._lines.put(None)

    def alive(self) -> bool:
        return self.process.poll() is None

    def ask(self, request: str, deadline_s: float) -> str | None:
        """The answer line to one request, None past the deadline (the child is then killed and replaced)."""
        self.searches += 1
        try:
            self.process.stdin.write(request + "\n")
            self.process.stdin.flush()
            line = self._lines.get(timeout=max(0.0, deadline_s - time.monotonic()))
        except queue.Empty:
            self.kill()
            return None
        except OSError:
            line = None
        if line is None:
            raise SearchUnavailable("search: the search process ended without an answer (out of memory?); "
                                    "narrow the search (fewer GPU types, a smaller max_gpus).")
        return line

    def replaced(self) -> _Child:
        self.kill()
        return _Child()

    def kill(self) -> None:
        """Stop the process; its reader thread ends at the end of its output."""
        self.process.kill()
        self.process.wait()
        with contextlib.suppress(OSError):  # a broken pipe: the process is gone anyway
            self.process.stdin.close()


def _answer(line: str) -> dict[str, Any]:
    message = json.loads(line)
    if "ok" in message:
        return message["ok"]
    if "input" in message:
        field, text = message["input"]
        raise TrainrigError(field, text)
    raise RuntimeError(f"the search failed:\n{message.get('crash', message)}")
