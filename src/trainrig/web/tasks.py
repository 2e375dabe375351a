"""What a worker process computes for each API route: the request's JSON in, the answer's JSON out.

Every route that computes something runs here, in a child process (`search_child`), so that a request
past its time limit can be stopped by killing the process: a thread cannot be interrupted. The checks
that keep a request to data only (`job_mapping`, `checked_what_ifs`, `model_source`) run here too:
they parse user content (an uploaded config.json, what-ifs), which is work with a size like any other.
Nothing here imports FastAPI, so a child starts with only what it computes with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainrig.answers import estimate_json, estimate_with_variants, timed
from trainrig.errors import TrainrigError
from trainrig.web.inputs import checked_what_ifs, job_mapping, model_source, resolved_model

__all__ = ["TASKS", "SEARCH_TASKS", "REQUEST_TASKS"]


def _job(body: dict[str, Any]) -> dict[str, Any]:
    return job_mapping({key: body[key] for key in ("model", "hardware", "training") if key in body})


def estimate_task(body: dict[str, Any]) -> dict[str, Any]:
    mapping = _job(body)
    changes = checked_what_ifs(mapping, body.get("what_if") or [])
    base, variants = estimate_with_variants(mapping, changes, body.get("price_usd_per_gpu_hour"))
    return estimate_json(base, variants)


def fit_task(body: dict[str, Any]) -> dict[str, Any]:
    from trainrig.fit_answers import fit_answer

    return fit_answer(_job(body)).to_dict()


def node_task(body: dict[str, Any]) -> dict[str, Any]:
    from trainrig.catalog import load_catalog
    from trainrig.catalog.job_file import load_job
    from trainrig.estimate import DEFAULT_PARAMETERS
    from trainrig.estimate import estimate as run_estimate
    from trainrig.plan.node import node_advice

    job = load_job(_job(body))
    if job.training.tokens is None:  # node_advice sizes the dataset's storage from it (and fails without)
        raise TrainrigError("training.tokens", "is needed to size the node's storage; give the training tokens, "
                                               "e.g. 1e12.")
    est = run_estimate(job, price_usd_per_gpu_hour=body.get("price_usd_per_gpu_hour"))
    if not est.fits:
        return {"node": None, "message": est.fit_message}
    return {"node": node_advice(job, est, load_catalog(), DEFAULT_PARAMETERS).to_dict(), "message": None}


def model_task(body: dict[str, Any]) -> dict[str, Any]:
    return resolved_model(body["model"])


Progress = Callable[[int, int], None]
"""(configurations evaluated so far, configurations in all), as `trainrig.plan.search.SearchProgress`."""


def _search(name: str) -> Callable[..., dict[str, Any]]:
    def search(arguments: dict[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        from trainrig.plan import planner  # here: the search's imports are a search child's alone

        function = getattr(planner, name)
        extra = {"progress": progress} if progress is not None else {}
        return timed(function, **{**arguments, "model": model_source(arguments["model"])}, **extra).to_dict()

    return search


def search_check_task(arguments: dict[str, Any]) -> dict[str, Any]:
    """A search's input checked as `plan()` checks it before it searches (`Planner.create`: the model, the GPU
    types, the constraints), so a plan job with bad input is refused at once with the 422 /api/plan gives."""
    from trainrig.plan.planner import Planner

    given = {key: value for key, value in arguments.items() if key != "per_gpu_type"}
    Planner.create(**{**given, "model": model_source(given["model"])})
    return {}


SEARCH_TASKS: dict[str, Callable[..., dict[str, Any]]] = {
    "plan": _search("plan"), "compare": _search("compare")}
REQUEST_TASKS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "estimate": estimate_task, "fit": fit_task, "node": node_task, "model": model_task,
    "search_check": search_check_task}
TASKS = {**SEARCH_TASKS, **REQUEST_TASKS}
