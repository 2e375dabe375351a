"""Every failure as JSON `{field, message}`: 422 for bad input (a request past the time limit included),
408/413/404/405 as HTTP says, 503 (with Retry-After) when the server is busy. The message is the
sentence the CLI would print; `field` names where the problem is."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from trainrig.errors import TrainrigError, from_validation_error
from trainrig.web.plan_worker import SearchUnavailable

__all__ = ["ErrorBody", "FiniteJSONResponse", "install_error_handlers", "ERROR_RESPONSES", "SEARCH_RESPONSES"]

log = logging.getLogger("trainrig.web")

# pydantic names the member of a union that failed (`model.str`, `global_batch.int`); users never typed those
_UNION_TAGS = {"str", "int", "float", "bool", "none", "list", "dict"}


class ErrorBody(BaseModel):
    """What every 4xx and 5xx answer holds."""

    field: str | None
    """The offending field (dotted, as in a job file: `hardware.gpu`), `body` for the body as a whole."""
    message: str
    """One sentence: what is wrong and what would be valid."""


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    408: {"model": ErrorBody, "description": "The request body did not arrive within the server's time limit."},
    413: {"model": ErrorBody, "description": "The request body is larger than the server accepts."},
    422: {"model": ErrorBody, "description": "Invalid input (a body that is not UTF-8 JSON, or a request that took "
                                             "longer than the server's time limit, included); `field` names it."},
    503: {"model": ErrorBody, "description": "The server is busy (the Retry-After header says for how long), "
                                             "or a worker process died."},
}
SEARCH_RESPONSES: dict[int | str, dict[str, Any]] = ERROR_RESPONSES


class FiniteJSONResponse(JSONResponse):
    """JSON with a non-finite float (an infinite speed-up, say) written as null: browsers reject `Infinity`."""

    def render(self, content: Any) -> bytes:
        return json.dumps(_finite(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def error_response(status: int, field: str | None, message: str) -> JSONResponse:
    return JSONResponse({"field": field, "message": message}, status_code=status)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(TrainrigError, _trainrig_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(SearchUnavailable, _search_unavailable)
    app.add_exception_handler(Exception, _server_error)


async def _trainrig_error(request: Request, error: TrainrigError) -> JSONResponse:
    return error_response(422, error.field or "body", str(error))


async def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    problem = request_problem(list(error.errors()))
    return error_response(422, problem.field or "body", str(problem))


def request_problem(errors: list[dict[str, Any]]) -> TrainrigError:
    """One TrainrigError from FastAPI's list of request errors, worded as the loaders word theirs."""
    first = errors[0] if errors else {"type": "value_error", "loc": ("body",), "msg": "invalid request"}
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "syntax error")
        return TrainrigError("body", f"is not valid JSON ({detail}).")
    cleaned = [{**e, "loc": _location(e.get("loc", ()))} for e in errors] or [first]
    problem = from_validation_error(_Errors(cleaned))
    if not problem.field:
        return TrainrigError("body", problem.message)
    return problem


def _location(loc: tuple | list) -> tuple:
    parts = list(loc)[1:] if loc and loc[0] in ("body", "query", "path") else list(loc)
    return tuple(p for p in parts if not (isinstance(p, str) and (p in _UNION_TAGS or "[" in p)))


class _Errors:
    """The face of a pydantic ValidationError that `from_validation_error` reads."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self._errors = errors

    def errors(self, include_url: bool = False) -> list[dict[str, Any]]:
        return self._errors


async def _http_error(request: Request, error: HTTPException) -> JSONResponse:
    if error.status_code == 400:  # FastAPI could not read the body (not UTF-8, say): bad input like any other
        return error_response(422, "body", f"body: is not valid JSON text ({str(error.detail).lower()}).")
    field = "body" if error.status_code == 413 else None
    response = error_response(error.status_code, field, str(error.detail))
    if error.headers:
        response.headers.update(error.headers)
    return response


async def _search_unavailable(request: Request, error: SearchUnavailable) -> JSONResponse:
    response = error_response(503, error.field or "body", error.message)
    if error.retry_after_s is not None:
        response.headers["retry-after"] = str(error.retry_after_s)
    return response


async def _server_error(request: Request, error: Exception) -> JSONResponse:
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=error)
    return error_response(500, None, f"internal error ({type(error).__name__}); the server log has the details.")
