"""The JSON API: each route parses its body, calls the function the CLI calls, and returns its JSON.

`/api/gpus`, `/api/models`, `/api/estimate`, `/api/plan` and `/api/compare` answer exactly what
`trainrig gpus|models|estimate|plan|compare --json` prints for the same input (`search_time_s`
aside, which is a measured wall time). `/api/catalog`, `/api/model` and `/api/node` serve the page:
the links, storage and offers to choose from, a model source resolved to its spec (an uploaded
config.json becomes the job file's `model:` mapping), and the node sized around a fixed configuration
(what `plan` gives each of its plans). Routes are plain `def`s: FastAPI runs them in its thread pool.
Every route that computes runs its work in a worker process under a time limit (`plan_worker`): plan and
compare in one pool, the others in their own, so a thread waits at most that limit and is never lost.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from trainrig.answers import gpus_answer, models_answer
from trainrig.catalog import load_catalog
from trainrig.errors import TrainrigError
from trainrig.estimate.result import Estimate
from trainrig.plan.result import CompareResult, PlanResult
from trainrig.web.errors import ERROR_RESPONSES, SEARCH_RESPONSES, FiniteJSONResponse
from trainrig.web.inputs import CompareBody, EstimateBody, ModelBody, PlanBody, body_error, plan_arguments

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


@router.post("/plan", responses={**_ok("`trainrig plan --json`", model=PlanResult), **SEARCH_RESPONSES})
def plan(body: PlanBody, request: Request) -> FiniteJSONResponse:
    """The best configurations for the job under the deadline and budget, with the time–cost points."""
    return FiniteJSONResponse(_search(request, "plan", body))


@router.post("/compare", responses={**_ok("`trainrig compare --json`", model=CompareResult), **SEARCH_RESPONSES})
def compare(body: CompareBody, request: Request) -> FiniteJSONResponse:
    """The best configuration on each GPU type, side by side."""
    return FiniteJSONResponse(_search(request, "compare", body))


def _computed(request: Request, task: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A quick route's answer, from the request pool (its own processes: never behind a search)."""
    return request.app.state.request_pool.run(task, arguments)


def _search(request: Request, search: str, body: CompareBody) -> dict[str, Any]:
    try:
        return request.app.state.plan_worker.run(search, plan_arguments(body))
    except TrainrigError as error:
        raise body_error(error) from None
