"""One worker process of the web server: one JSON request per line on stdin, one answer per line on stdout.

Request: `{"task": "plan" | "compare" | "estimate" | "fit" | "node" | "model", "arguments": {...}}` (a
search's keyword arguments, or a route's request body; see `trainrig.web.tasks`), with `"progress": true`
for a search whose progress the server wants to hear.
Answer: `{"ok": <the CLI's --json>}`, `{"input": [field, message]}` for bad input, or `{"crash": traceback}`.
Before it, a search asked for progress writes lines `{"progress": [evaluated, total]}` (configurations),
at most one per PROGRESS_EVERY_S, the first (with the total) and the last always.
`trainrig.web.plan_worker` starts it and kills it when a request passes the server's time limit or is cancelled.

`--warm-up search` or `--warm-up requests` (the pool that starts it says which): before reading its first
request the child imports what those tasks compute with and answers one tiny request of each kind to itself,
so the first request a person sends pays neither the imports (0.1-0.4 s for a search) nor the first-call costs
of the code it runs. The warm-up writes nothing on stdout; a warm-up that fails is ignored (the request that
follows reports its own error).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from trainrig.catalog import load_catalog
from trainrig.errors import TrainrigError
from trainrig.web.tasks import SEARCH_TASKS, TASKS

PROGRESS_EVERY_S = 0.1
"""Shortest time between two progress lines: the page polls every 250 ms, and a line costs microseconds."""


def progress_writer() -> Callable[[int, int], None]:
    """A search's progress callback that writes throttled progress lines (the search itself never sees a clock)."""
    last_s = -float("inf")

    def report(evaluated: int, total: int) -> None:
        nonlocal last_s
        now_s = time.monotonic()
        if evaluated in (0, total) or now_s - last_s >= PROGRESS_EVERY_S:
            last_s = now_s
            sys.stdout.write(json.dumps({"progress": [evaluated, total]}) + "\n")
            sys.stdout.flush()

    return report


def answer(request: dict[str, Any]) -> dict[str, Any]:
    try:
        if request.get("progress") and request.get("task") in SEARCH_TASKS:
            return {"ok": SEARCH_TASKS[request["task"]](request["arguments"], progress_writer())}
        return {"ok": TASKS[request["task"]](request["arguments"])}
    except TrainrigError as error:
        return {"input": [error.field, error.message]}
    except Exception:  # the server logs it and answers 500
        return {"crash": traceback.format_exc()}


# What each pool's children compute once before their first request: small enough to take a fraction of a
# second, and taking the same code paths as the real requests (the search, the chosen plans' estimates and
# nodes, the JSON of the answer).
WARM_UP_SEARCH = {"model": "gpt3-125m", "tokens": 1e9, "gpu_types": ["H100-SXM5-80GB"], "max_gpus": 8,
                  "deadline_days": 30}
WARM_UP_JOB = {"model": "gpt3-125m", "hardware": {"gpu": "H100-SXM5-80GB", "n_gpus": 8},
               "training": {"tokens": 1e9}}
WARM_UPS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "search": (("search_check", WARM_UP_SEARCH), ("plan", WARM_UP_SEARCH)),
    "requests": (("estimate", WARM_UP_JOB), ("node", WARM_UP_JOB), ("search_check", WARM_UP_SEARCH)),
}


def warm_up(kind: str) -> None:
    """Run the pool's warm-up requests, answers discarded; never fails (a broken warm-up only costs speed)."""
    for task, arguments in WARM_UPS.get(kind, ()):
        with contextlib.suppress(Exception):
            json.dumps(TASKS[task](arguments))


def main(argv: Sequence[str] | None = None) -> None:
    """Answer requests, one JSON line each, until stdin closes (the server stops or replaces this child)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    load_catalog()  # warm before the first request, so a request starts at once
    if argv[:1] == ["--warm-up"] and len(argv) > 1:
        warm_up(argv[1])
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except json.JSONDecodeError:
            request = None
        reply = answer(request) if isinstance(request, dict) else {"crash": f"not a request: {line[:80]!r}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
