"""Plan and compare searches as jobs: created at once, polled for progress, cancellable, kept a while.

`POST /api/plan/jobs` takes a place in the search pool (or is refused with a 503 and Retry-After, as
`/api/plan` is) and starts a thread that waits on the search; the page polls `GET …/{id}` for the
configurations evaluated, the elapsed time and, at the end, the answer `/api/plan` gives. A request
identical to one answered before is answered from the pool's cache: the job is born done (`cached`), so
a shared link opens at once; one identical to a job still queued or running joins that job (a second tab
on the same link does not search twice). `DELETE …/{id}` sets the job's cancel flag: the pool kills that
search's child and starts another. At most `max_jobs` jobs are kept; past that, the oldest finished go first.

A poll may wait (`GET …/{id}?wait_s=0.25`): it answers as soon as the job ends, or with the progress once
`wait_s` has passed, so the page learns of the answer the moment it is there rather than at its next poll.
The wait is a coroutine on the server's event loop, looking every WAIT_STEP_S: a waiting poll holds none
of the threads the other routes run in.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from trainrig.errors import TrainrigError
from trainrig.web.inputs import body_error
from trainrig.web.plan_worker import (
    SearchCancelled,
    SearchHooks,
    SearchTooLong,
    SearchUnavailable,
    WorkerPool,
    request_key,
)

__all__ = ["SearchJob", "JobStore", "FINISHED", "MAX_POLL_WAIT_S", "too_long_message"]

FINISHED = ("done", "failed", "cancelled")
MAX_POLL_WAIT_S = 5.0
"""The longest one poll may wait for its job to end."""
WAIT_STEP_S = 0.01
"""How often a waiting poll looks whether its job has ended: the most it adds to the answer's arrival."""
log = logging.getLogger("trainrig.web")


def too_long_message(limit_s: float) -> str:
    """What a person at the page can do about a search past the server's limit."""
    return (f"took longer than the {limit_s:g} s this server allows one search, so it was stopped. Narrow it and "
            "run it again: fewer GPU types, a smaller maximum GPU count, or one global batch instead of a range.")


@dataclass
class SearchJob:
    """One search: its state as the API shows it, and the flag that cancels it."""

    id: str
    task: str
    """`plan` or `compare`."""
    status: str = "queued"
    evaluated: int = 0
    """Configurations evaluated so far (at the end: the answer's n_configurations_evaluated)."""
    total: int | None = None
    """Configurations the whole search evaluates; null until the search has counted them."""
    cached: bool = False
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    started_s: float = field(default_factory=time.monotonic)
    finished_s: float | None = None
    hooks: SearchHooks = field(default_factory=SearchHooks)
    lock: threading.Lock = field(default_factory=threading.Lock)
    ended: threading.Event = field(default_factory=threading.Event)
    """Set once the job is done, failed or cancelled: what a waiting poll waits for."""

    async def ended_within(self, wait_s: float) -> bool:
        """Whether the job has ended, waiting up to `wait_s` (at most MAX_POLL_WAIT_S) for it on the event loop."""
        deadline_s = time.monotonic() + min(wait_s, MAX_POLL_WAIT_S)
        while not self.ended.is_set():
            remaining_s = deadline_s - time.monotonic()
            if remaining_s <= 0:
                return False
            await asyncio.sleep(min(WAIT_STEP_S, remaining_s))
        return True

    def view(self) -> dict[str, Any]:
        """The JSON of `GET …/jobs/{id}`."""
        with self.lock:
            end_s = self.finished_s if self.finished_s is not None else time.monotonic()
            return {"id": self.id, "status": self.status, "cached": self.cached, "evaluated": self.evaluated,
                    "total": self.total, "elapsed_s": round(end_s - self.started_s, 3), "result": self.result,
                    "error": self.error}

    def finish(self, status: str, result: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None) -> None:
        with self.lock:
            if self.status in FINISHED:  # cancelled while the answer was on its way: it stays cancelled
                return
            self.status, self.result, self.error = status, result, error
            self.finished_s = time.monotonic()
            if result is not None and "n_configurations_evaluated" in result:
                self.evaluated = self.total = result["n_configurations_evaluated"]
        self.ended.set()

    def _started(self) -> None:
        with self.lock:
            if self.status == "queued":
                self.status = "running"

    def _progress(self, evaluated: int, total: int) -> None:
        with self.lock:
            self.evaluated, self.total = evaluated, total


class JobStore:
    """The jobs of one search pool, by id; thread-safe."""

    def __init__(self, pool: WorkerPool, max_jobs: int) -> None:
        self.pool = pool
        self.max_jobs = max_jobs
        self._jobs: OrderedDict[str, SearchJob] = OrderedDict()
        self._active: dict[str, SearchJob] = {}
        """Queued or running jobs by request key, for identical requests to join."""
        self._lock = threading.Lock()

    def submit(self, task: str, arguments: dict[str, Any]) -> SearchJob:
        """A new job: done at once from the cache, or queued with a thread waiting on the search.
        SearchUnavailable (a 503) when the pool has no place left."""
        job = SearchJob(id=secrets.token_urlsafe(12), task=task)  # unguessable: no one cancels another's job
        cached = self.pool.cached(task, arguments)
        if cached is not None:
            job.cached = True
            job.finish("done", result=cached)
            self._keep(job)
            return job
        key = request_key(task, arguments)
        with self._lock:
            running = self._active.get(key)
            if running is not None and running.status not in FINISHED:
                return running
            self.pool.admit()  # raises SearchUnavailable (503) when full: nothing is kept then
            self._active[key] = job
        job.hooks = SearchHooks(on_start=job._started, on_progress=job._progress)
        self._keep(job)
        threading.Thread(target=self._run, args=(job, arguments), daemon=True, name=f"trainrig-{task}-job").start()
        return job

    def get(self, task: str, job_id: str) -> SearchJob | None:
        with self._lock:
            job = self._jobs.get(job_id)
        return job if job is not None and job.task == task else None

    def cancel(self, task: str, job_id: str) -> SearchJob | None:
        """Cancel a queued or running job (a finished one is left as it is); None for an unknown id."""
        job = self.get(task, job_id)
        if job is not None:
            job.hooks.cancelled.set()
            job.finish("cancelled")
            self._forget(job)
        return job

    def _forget(self, job: SearchJob) -> None:
        """A finished job takes no more joiners: an identical request after it searches again (or hits the cache)."""
        with self._lock:
            for key in [k for k, active in self._active.items() if active is job]:
                del self._active[key]

    def _keep(self, job: SearchJob) -> None:
        with self._lock:
            self._jobs[job.id] = job
            # jobs still running are few (the pool admits size + max_queued); the finished ones make room
            for old_id in [i for i, old in self._jobs.items() if old.status in FINISHED]:
                if len(self._jobs) <= self.max_jobs:
                    break
                del self._jobs[old_id]

    def _run(self, job: SearchJob, arguments: dict[str, Any]) -> None:
        try:
            job.finish("done", result=self.pool.compute(job.task, arguments, job.hooks))
        except SearchCancelled:
            job.finish("cancelled")
        except SearchTooLong as error:
            message = str(TrainrigError(error.field, too_long_message(error.limit_s)))
            job.finish("failed", error={"field": error.field, "message": message})
        except TrainrigError as error:
            problem = body_error(error)
            job.finish("failed", error={"field": problem.field or "body", "message": str(problem)})
        except SearchUnavailable as error:
            job.finish("failed", error={"field": error.field or "search", "message": error.message})
        except Exception as error:  # a bug: logged, and the job says so rather than running forever
            log.error("internal error in a %s job", job.task, exc_info=error)
            job.finish("failed", error={"field": None, "message": f"internal error ({type(error).__name__}); the "
                                                                  "server log has the details."})
        finally:
            self._forget(job)
            self.pool.release()
