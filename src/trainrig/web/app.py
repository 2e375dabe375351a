"""The FastAPI app: the page, its static files (all shipped in the package) and the JSON API."""

from __future__ import annotations

from collections.abc import AsyncIterator
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
from trainrig.web.limits import BodySizeLimit
from trainrig.web.plan_worker import PlanWorker
from trainrig.web.routes import router
from trainrig.web.settings import Settings

__all__ = ["create_app", "STATIC_DIR"]

STATIC_DIR = Path(__file__).parent / "static"
# The page loads nothing from elsewhere: scripts, styles and data come from this server only.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
                           "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def create_app(settings: Settings | None = None, allowed_hosts: tuple[str, ...] | None = None) -> FastAPI:
    """The app; `allowed_hosts` (Host header names) guards a loopback server against DNS rebinding."""
    settings = settings or Settings()
    worker = PlanWorker(settings.plan_timeout_s, settings.max_parallel_plans)
    app = FastAPI(title="trainrig", version=trainrig.__version__, docs_url=None, redoc_url=None,
                  lifespan=_lifespan(worker),
                  description="Will it fit, how long, what cost, which hardware: the planner's JSON API. "
                              "Each answer is what the CLI prints with --json for the same input.")
    app.state.settings = settings
    app.state.plan_worker = worker
    install_error_handlers(app)
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_api_route("/", _index, include_in_schema=False)
    app.add_middleware(BodySizeLimit, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(_SecurityHeaders)
    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    return app


def _lifespan(worker: PlanWorker):
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker.start()
        try:
            yield
        finally:
            worker.close()

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
