"""The FastAPI app: the page, its static files (all shipped in the package) and the JSON API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import trainrig
from trainrig.web.errors import install_error_handlers
from trainrig.web.limits import RequestBodyLimits
from trainrig.web.plan_worker import CHILD_COMMAND, WorkerPool
from trainrig.web.routes import router
from trainrig.web.settings import Settings

__all__ = ["create_app", "worker_pools", "STATIC_DIR"]

STATIC_DIR = Path(__file__).parent / "static"
# The page loads nothing from elsewhere: scripts, styles and data come from this server only.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
                           "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def create_app(settings: Settings | None = None, allowed_hosts: tuple[str, ...] | None = None) -> FastAPI:
    """The app; `allowed_hosts` (Host header names) guards a loopback server against DNS rebinding."""
    settings = settings or Settings()
    plans, requests = worker_pools(settings)
    app = FastAPI(title="trainrig", version=trainrig.__version__, docs_url=None, redoc_url=None,
                  lifespan=_lifespan(plans, requests),
                  description="Will it fit, how long, what cost, which hardware: the planner's JSON API. "
                              "Each answer is what the CLI prints with --json for the same input.")
    app.state.settings = settings
    app.state.plan_worker = plans
    app.state.request_pool = requests
    install_error_handlers(app)
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_api_route("/", _index, include_in_schema=False)
    app.add_middleware(RequestBodyLimits, max_body_bytes=settings.max_body_bytes,
                       body_timeout_s=settings.body_timeout_s)
    app.add_middleware(_SecurityHeaders)
    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    return app


def worker_pools(settings: Settings, child_command: Sequence[str] = CHILD_COMMAND) -> tuple[WorkerPool, WorkerPool]:
    """The searches' pool and the other routes' pool: separate, so an estimate never waits behind a plan."""
    plans = WorkerPool("search", settings.plan_timeout_s, settings.max_parallel_plans, settings.max_queued_plans,
                       cache_entries=settings.result_cache_entries, child_command=child_command, niceness=10,
                       warm_up="search",
                       narrow_hint="narrow it and run it again: fewer GPU types, a smaller maximum GPU count, or one "
                                   "global batch instead of a range.")
    requests = WorkerPool("body", settings.request_timeout_s, settings.max_parallel_requests,
                          settings.max_queued_requests, cache_entries=settings.result_cache_entries,
                          child_command=child_command, warm_up="requests",
                          narrow_hint="make the job smaller (fewer layers, GPUs or what-ifs).")
    return plans, requests


def _lifespan(*pools: WorkerPool):
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        for pool in pools:
            pool.start()
        try:
            yield
        finally:
            for pool in pools:
                pool.close()

    return lifespan


def _index(request: Request) -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html")


class _SecurityHeaders:
    """CSP (nothing fetched from elsewhere), no MIME sniffing, no framing: on every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
                                      (b"x-content-type-options", b"nosniff"),
                                      (b"referrer-policy", b"no-referrer")]
            await send(message)

        await self.app(scope, receive, with_headers)
