"""A cap on request bodies, as plain ASGI middleware (it works with any FastAPI/Starlette version).

A declared Content-Length over the cap is refused before anything is read; a body sent without one
is counted as it arrives and refused as soon as it passes the cap. Either way the answer is a 413
that names the limit, and the server never holds more than the cap of one body in memory.
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodySizeLimit", "too_large_message"]


def too_large_message(max_body_bytes: int) -> str:
    return f"request body: larger than the {max_body_bytes:,} bytes this server accepts."


class BodySizeLimit:
    """Refuse request bodies larger than `max_body_bytes` with a 413."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared_bytes = _content_length(scope)
        if declared_bytes is not None and declared_bytes > self.max_body_bytes:
            await self._refuse(send)
            return
        await self.app(scope, self._counting(receive), send)

    def _counting(self, receive: Receive) -> Receive:
        received_bytes = 0

        async def counted() -> Message:
            nonlocal received_bytes
            message = await receive()
            if message["type"] == "http.request":
                received_bytes += len(message.get("body", b""))
                if received_bytes > self.max_body_bytes:
                    # FastAPI re-raises an HTTPException met while reading the body: it becomes the 413
                    raise HTTPException(413, too_large_message(self.max_body_bytes))
            return message

        return counted

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"field": "body", "message": too_large_message(self.max_body_bytes)}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
