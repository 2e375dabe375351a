"""The JSON API: each route parses its body, calls the function the CLI calls, and returns its JSON.

`/api/gpus`, `/api/models`, `/api/estimate`, `/api/plan` and `/api/compare` answer exactly what
`trainrig gpus|models|estimate|plan|compare --json` prints for the same input (`search_time_s`
aside, which is a measured wall time). `/api/catalog`, `/api/model` and `/api/node` serve the page:
the links, storage and offers to choose from, a model source resolved to its spec (an uploaded
config.json becomes the job file's `model:` mapping), and the node sized around a fixed configuration
(what `plan` gives each of its plans). Routes are plain `def`s: FastAPI runs them in its thread pool; a job's
GET is a coroutine, so a poll that waits for its job's end (`?wait_s`) holds no thread meanwhile.
Every route that computes runs its work in a worker process under a time limit (`plan_worker`): plan and
compare in one pool, the others in their own, so a thread waits at most that limit and is never lost.
`/api/plan/jobs` and `/api/compare/jobs` run the same searches as jobs (`jobs.py`): the POST answers at
once with an id, GET polls the progress and finally holds the answer, DELETE cancels.
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter, Query, Request

from trainrig.answers import gpus_answer, models_answer
from trainrig.catalog import load_catalog
from trainrig.errors import TrainrigError
from trainrig.estimate.result import Estimate
from trainrig.plan.result import CompareResult, PlanResult
from trainrig.web.errors import ERROR_RESPONSES, SEARCH_RESPONSES, ErrorBody, FiniteJSONResponse
from trainrig.web.inputs import CompareBody, EstimateBody, ModelBody, PlanBody, body_error, plan_arguments
from trainrig.web.jobs import MAX_POLL_WAIT_S, JobStore

__all__ = ["router"]

router = APIRouter(prefix="/api", default_response_class=FiniteJSONResponse)


def _ok(description: str, schema: dict[str, Any] | None = None, model: Any = None) -> dict[int | str, Any]:
    answer: dict[str, Any] = {"description": description}
    if model is not None:
        answer["model"] = model
    else:
        answer["content"] = {"application/json": {"schema": schema or {"type": "object"}}}
    return {200: answer}


@router.get("/gpus", responses=_ok("`trainrig gpus --json`", {"type": "array", "items": {"type": "object"}}))
def gpus() -> FiniteJSONResponse:
    """Every GPU in the catalog, with its figures and sources."""
    return FiniteJSONResponse(gpus_answer())


@router.get("/models", responses=_ok("`trainrig models --json`", {"type": "array", "items": {"type": "object"}}))
def models() -> FiniteJSONResponse:
    """Every model preset, with its shape and parameter counts."""
    return FiniteJSONResponse(models_answer())


@router.get("/catalog", responses=_ok("Links, storage kinds and cloud offers"))
def catalog() -> FiniteJSONResponse:
    """The parts the page lets one choose beside GPUs and models: links, storage, and priced offers."""
    parts = load_catalog()
    return FiniteJSONResponse({
        "links": [link.model_dump(mode="json") for link in parts.links],
        "storage": [storage.model_dump(mode="json") for storage in parts.storage],
        "offers": [offer.model_dump(mode="json") for offer in parts.offers],
    })


@router.post("/model", responses={**_ok("The spec, as a job file's model: mapping, and its counts"),
                                  **ERROR_RESPONSES})
def model(body: ModelBody, request: Request) -> FiniteJSONResponse:
    """A model source (preset, fields, or an uploaded config.json's content) resolved to its spec."""
    return FiniteJSONResponse(_computed(request, "model", {"model": body.model}))


@router.post("/estimate", responses={**_ok("`trainrig estimate --json`", model=Estimate), **ERROR_RESPONSES})
def estimate(body: EstimateBody, request: Request) -> FiniteJSONResponse:
    """Memory, step time, throughput, MFU, time and cost of one configuration, with the what-ifs."""
    return FiniteJSONResponse(_computed(request, "estimate", body.model_dump()))


@router.post("/fit", responses={**_ok("`trainrig fit --json`: largest micro-batch, longest sequence, fewest GPUs, "
                                       "cheapest GPU type that fit"), **ERROR_RESPONSES})
def fit(body: EstimateBody, request: Request) -> FiniteJSONResponse:
    """What fits: the largest micro-batch and sequence, the fewest GPUs and the cheapest GPU type."""
    return FiniteJSONResponse(_computed(request, "fit", body.model_dump()))


@router.post("/node", responses={**_ok("The node around the GPUs, each choice with its reason"),
                                 **ERROR_RESPONSES})
def node(body: EstimateBody, request: Request) -> FiniteJSONResponse:
    """CPU cores, RAM, storage and network for one configuration (null when it does not fit)."""
    return FiniteJSONResponse(_computed(request, "node", body.model_dump()))


PER_GPU_TYPE = Query(False, description="One plan per GPU type, each type's best (the rows `trainrig compare` "
                                         "gives), rather than the best overall.")


@router.post("/plan", responses={**_ok("`trainrig plan --json`", model=PlanResult), **SEARCH_RESPONSES})
def plan(body: PlanBody, request: Request, per_gpu_type: bool = PER_GPU_TYPE) -> FiniteJSONResponse:
    """The best configurations for the job under the deadline and budget, with the time–cost points."""
    return FiniteJSONResponse(_search(request, "plan", body, per_gpu_type))


@router.post("/compare", responses={**_ok("`trainrig compare --json`", model=CompareResult), **SEARCH_RESPONSES})
def compare(body: CompareBody, request: Request) -> FiniteJSONResponse:
    """The best configuration on each GPU type, side by side."""
    return FiniteJSONResponse(_search(request, "compare", body))


def _computed(request: Request, task: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A quick route's answer, from the request pool (its own processes: never behind a search)."""
    return request.app.state.request_pool.run(task, arguments)


def _search(request: Request, search: str, body: CompareBody, per_gpu_type: bool = False) -> dict[str, Any]:
    try:
        return request.app.state.plan_worker.run(search, _search_arguments(body, per_gpu_type))
    except TrainrigError as error:
        raise body_error(error) from None


def _search_arguments(body: CompareBody, per_gpu_type: bool = False) -> dict[str, Any]:
    arguments = plan_arguments(body)
    if per_gpu_type:  # only when asked, so the cache key of every other request is what it always was
        arguments["per_gpu_type"] = True
    return arguments


# ---- searches as jobs ------------------------------------------------------------------------------------

JOB_SCHEMA = {"type": "object", "required": ["id", "status", "evaluated", "total", "elapsed_s", "result", "error"],
              "properties": {
                  "id": {"type": "string"},
                  "status": {"type": "string", "enum": ["queued", "running", "done", "failed", "cancelled"]},
                  "cached": {"type": "boolean", "description": "Answered from the cache of earlier answers."},
                  "evaluated": {"type": "integer", "description": "Configurations evaluated so far."},
                  "total": {"type": ["integer", "null"], "description": "Configurations in the whole search."},
                  "elapsed_s": {"type": "number", "description": "Seconds since the job was created (until it "
                                                                 "finished)."},
                  "result": {"type": ["object", "null"], "description": "The answer /api/plan (or /api/compare) "
                                                                        "gives, once done."},
                  "error": {"anyOf": [{"$ref": "#/components/schemas/ErrorBody"}, {"type": "null"}]}}}
CREATED_SCHEMA = {"type": "object", "required": ["id", "status", "cached"],
                  "properties": {"id": {"type": "string"}, "status": {"type": "string"},
                                 "cached": {"type": "boolean"}}}
_JOB_FOUND = {200: {"description": "The job's state", "content": {"application/json": {"schema": JOB_SCHEMA}}},
              404: {"model": ErrorBody, "description": "No job with that id (never made, or dropped since)."}}
_JOB_CREATED = {202: {"description": "The job, queued (or done at once from the cache); poll GET …/jobs/{id}",
                      "content": {"application/json": {"schema": CREATED_SCHEMA}}}, **SEARCH_RESPONSES}
_JOBS_LOCK = threading.Lock()
WAIT_S = Query(0.0, ge=0, le=MAX_POLL_WAIT_S,
               description="Wait up to this many seconds for the job to end: the answer comes as soon as it has "
                           "(done, failed or cancelled), or with its progress once the time has passed.")


@router.post("/plan/jobs", status_code=202, responses=_JOB_CREATED)
def plan_job(body: PlanBody, request: Request, per_gpu_type: bool = PER_GPU_TYPE) -> FiniteJSONResponse:
    """Start a plan search (the /api/plan body); an identical request answered before is done at once."""
    return _created(request, "plan", _search_arguments(body, per_gpu_type))


@router.get("/plan/jobs/{job_id}", responses=_JOB_FOUND)
async def plan_job_state(job_id: str, request: Request, wait_s: float = WAIT_S) -> FiniteJSONResponse:
    """A plan job: status, configurations evaluated of the total, elapsed time, and the answer once done."""
    return await _state(request, "plan", job_id, wait_s)


@router.delete("/plan/jobs/{job_id}", responses=_JOB_FOUND)
def cancel_plan_job(job_id: str, request: Request) -> FiniteJSONResponse:
    """Cancel a queued or running plan job (its search is stopped); a finished one is left as it is."""
    return _cancelled(request, "plan", job_id)


@router.post("/compare/jobs", status_code=202, responses=_JOB_CREATED)
def compare_job(body: CompareBody, request: Request) -> FiniteJSONResponse:
    """Start a compare search (the /api/compare body), as /api/plan/jobs does a plan."""
    return _created(request, "compare", _search_arguments(body))


@router.get("/compare/jobs/{job_id}", responses=_JOB_FOUND)
async def compare_job_state(job_id: str, request: Request, wait_s: float = WAIT_S) -> FiniteJSONResponse:
    """A compare job, as GET /api/plan/jobs/{id}."""
    return await _state(request, "compare", job_id, wait_s)


@router.delete("/compare/jobs/{job_id}", responses=_JOB_FOUND)
def cancel_compare_job(job_id: str, request: Request) -> FiniteJSONResponse:
    """Cancel a compare job, as DELETE /api/plan/jobs/{id}."""
    return _cancelled(request, "compare", job_id)


_OTHER_METHODS = ["POST", "PUT", "PATCH", "OPTIONS", "TRACE"]


# GET and DELETE of one path are two routes, and Starlette's 405 would name only the first one's methods
@router.api_route("/plan/jobs/{job_id}", methods=_OTHER_METHODS, include_in_schema=False)
@router.api_route("/compare/jobs/{job_id}", methods=_OTHER_METHODS, include_in_schema=False)
def job_method_not_allowed(job_id: str, request: Request) -> FiniteJSONResponse:
    return FiniteJSONResponse({"field": None, "message": "Method Not Allowed"}, status_code=405,
                              headers={"allow": "GET, DELETE"})


def _jobs(request: Request) -> JobStore:
    """The app's job store, made with the first job (beside the search pool it runs in)."""
    state = request.app.state
    with _JOBS_LOCK:
        if getattr(state, "search_jobs", None) is None:
            state.search_jobs = JobStore(state.plan_worker, state.settings.max_stored_jobs)
        return state.search_jobs


def _created(request: Request, task: str, arguments: dict[str, Any]) -> FiniteJSONResponse:
    store = _jobs(request)
    if store.pool.cached(task, arguments) is None:  # bad input is a 422 now, as /api/plan's, not a failed job
        try:
            request.app.state.request_pool.run("search_check", arguments)
        except TrainrigError as error:
            raise body_error(error) from None
    job = store.submit(task, arguments)
    return FiniteJSONResponse({"id": job.id, "status": job.status, "cached": job.cached}, status_code=202,
                              headers={"location": f"/api/{task}/jobs/{job.id}"})


async def _state(request: Request, task: str, job_id: str, wait_s: float = 0.0) -> FiniteJSONResponse:
    """The job's state; with `wait_s`, once it has ended or that long has passed (on the event loop, so a
    waiting poll holds no thread)."""
    job = _jobs(request).get(task, job_id)
    if job is None:
        return _unknown(task)
    if wait_s > 0:
        await job.ended_within(wait_s)
    return FiniteJSONResponse(job.view())


def _cancelled(request: Request, task: str, job_id: str) -> FiniteJSONResponse:
    job = _jobs(request).cancel(task, job_id)
    return _unknown(task) if job is None else FiniteJSONResponse(job.view())


def _unknown(task: str) -> FiniteJSONResponse:
    message = (f"id: no {task} job has this id; it was never made, or it finished long enough ago to be dropped. "
               f"Send the request again (POST /api/{task}/jobs): an answer still kept comes back at once.")
    return FiniteJSONResponse({"field": "id", "message": message}, status_code=404)
