"""One worker process of the web server: one JSON request per line on stdin, one answer per line on stdout.

Request: `{"task": "plan" | "compare" | "estimate" | "fit" | "node" | "model", "arguments": {...}}` (a
search's keyword arguments, or a route's request body; see `trainrig.web.tasks`).
Answer: `{"ok": <the CLI's --json>}`, `{"input": [field, message]}` for bad input, or `{"crash": traceback}`.
`trainrig.web.plan_worker` starts it and kills it when a request passes the server's time limit.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from trainrig.catalog import load_catalog
from trainrig.errors import TrainrigError
from trainrig.web.tasks import TASKS


def answer(request: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"ok": TASKS[request["task"]](request["arguments"])}
    except TrainrigError as error:
        return {"input": [error.field, error.message]}
    except Exception:  # the server logs it and answers 500
        return {"crash": traceback.format_exc()}


def main() -> None:
    """Answer requests, one JSON line each, until stdin closes (the server stops or replaces this child)."""
    load_catalog()  # warm before the first request, so a request starts at once
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
