"""The JSON API: each route parses its body, calls the function the CLI calls, and returns its JSON.

`/api/gpus`, `/api/models`, `/api/estimate`, `/api/plan` and `/api/compare` answer exactly what
`trainrig gpus|models|estimate|plan|compare --json` prints for the same input (`search_time_s`
aside, which is a measured wall time). `/api/catalog`, `/api/model` and `/api/node` serve the page:
the links, storage and offers to choose from, a model source resolved to its spec (an uploaded
config.json becomes the job file's `model:` mapping), and the node sized around a fixed configuration
(what `plan` gives each of its plans). Routes are plain `def`s: FastAPI runs them in its thread pool.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from trainrig.answers import estimate_json, estimate_with_variants, gpus_answer, models_answer
from trainrig.catalog import load_catalog
from trainrig.catalog.job_file import load_job
from trainrig.errors import TrainrigError
from trainrig.estimate import DEFAULT_PARAMETERS
from trainrig.estimate import estimate as run_estimate
from trainrig.estimate.result import Estimate
from trainrig.plan.node import node_advice
from trainrig.plan.result import CompareResult, PlanResult
from trainrig.web.errors import ERROR_RESPONSES, SEARCH_RESPONSES, FiniteJSONResponse
from trainrig.web.inputs import (
    CompareBody,
    EstimateBody,
    ModelBody,
    PlanBody,
    body_error,
    checked_what_ifs,
    job_mapping,
    plan_arguments,
    resolved_model,
)

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
def model(body: ModelBody) -> FiniteJSONResponse:
    """A model source (preset, fields, or an uploaded config.json's content) resolved to its spec."""
    return FiniteJSONResponse(resolved_model(body.model))


@router.post("/estimate", responses={**_ok("`trainrig estimate --json`", model=Estimate), **ERROR_RESPONSES})
def estimate(body: EstimateBody) -> FiniteJSONResponse:
    """Memory, step time, throughput, MFU, time and cost of one configuration, with the what-ifs."""
    mapping = job_mapping(body.job())
    changes = checked_what_ifs(mapping, body.what_if)
    base, variants = estimate_with_variants(mapping, changes, body.price_usd_per_gpu_hour)
    return FiniteJSONResponse(estimate_json(base, variants))


@router.post("/fit", responses={**_ok("`trainrig fit --json`: largest micro-batch, longest sequence, fewest GPUs, "
                                       "cheapest GPU type that fit"), **ERROR_RESPONSES})
def fit(body: EstimateBody) -> FiniteJSONResponse:
    """What fits: the largest micro-batch and sequence, the fewest GPUs and the cheapest GPU type."""
    from trainrig.fit_answers import fit_answer

    return FiniteJSONResponse(fit_answer(job_mapping(body.job())).to_dict())


@router.post("/node", responses={**_ok("The node around the GPUs, each choice with its reason"),
                                 **ERROR_RESPONSES})
def node(body: EstimateBody) -> FiniteJSONResponse:
    """CPU cores, RAM, storage and network for one configuration (null when it does not fit)."""
    job = load_job(job_mapping(body.job()))
    est = run_estimate(job, price_usd_per_gpu_hour=body.price_usd_per_gpu_hour)
    if not est.fits:
        return FiniteJSONResponse({"node": None, "message": est.fit_message})
    advice = node_advice(job, est, load_catalog(), DEFAULT_PARAMETERS)
    return FiniteJSONResponse({"node": advice.to_dict(), "message": None})


@router.post("/plan", responses={**_ok("`trainrig plan --json`", model=PlanResult), **SEARCH_RESPONSES})
def plan(body: PlanBody, request: Request) -> FiniteJSONResponse:
    """The best configurations for the job under the deadline and budget, with the time–cost points."""
    return FiniteJSONResponse(_search(request, "plan", body))


@router.post("/compare", responses={**_ok("`trainrig compare --json`", model=CompareResult), **SEARCH_RESPONSES})
def compare(body: CompareBody, request: Request) -> FiniteJSONResponse:
    """The best configuration on each GPU type, side by side."""
    return FiniteJSONResponse(_search(request, "compare", body))


def _search(request: Request, search: str, body: CompareBody) -> dict[str, Any]:
    try:
        return request.app.state.plan_worker.run(search, plan_arguments(body))
    except TrainrigError as error:
        raise body_error(error) from None
