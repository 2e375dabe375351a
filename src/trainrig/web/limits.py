"""Limits on request bodies, as plain ASGI middleware (it works with any FastAPI/Starlette version).

The whole body is read here, before the app sees it (bodies are capped at about a megabyte):
- a declared Content-Length over the cap is refused before anything is read, a body sent without one
  as soon as it passes the cap: a 413 that names the limit. The 413 does not ask to close the
  connection, so the server reads and drops the rest of the body and the client, still sending, gets
  the answer instead of a connection reset (a client that asked to close has its body read and
  dropped first, within the body deadline);
- a body not received within `body_timeout_s` (a client trickling it) gets a 408 and the connection
  closes, so no connection is held forever;
- a body that is not UTF-8 text is refused with a 422: JSON on the wire is UTF-8 (RFC 8259), and
  Python's json would otherwise guess UTF-16 or UTF-32 from NUL bytes; so is one holding NaN,
  Infinity or 1e400, which Python's json reads as floats but JSON does not have.
"""

from __future__ import annotations

import json
import math

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RequestBodyLimits", "too_large_message", "not_utf8_message", "too_slow_message"]


def too_large_message(max_body_bytes: int) -> str:
    return f"request body: larger than the {max_body_bytes:,} bytes this server accepts."


def not_utf8_message() -> str:
    return "request body: is not UTF-8 text (UTF-16, UTF-32 and other encodings are refused); send JSON as UTF-8."


NON_FINITE_MESSAGE = ("request body: holds NaN, Infinity or a number too large for a float, which JSON does not "
                      "allow; send finite numbers.")


def too_slow_message(body_timeout_s: float) -> str:
    return f"request body: not received within this server's {body_timeout_s:g} s limit; send it at once."


class _Refused(Exception):
    def __init__(self, status: int, message: str, close: bool = False) -> None:
        self.status = status
        self.message = message
        self.close = close
        """Whether to close the connection after the answer (a trickling client is not read further)."""


class _Disconnected(Exception):
    """The client went away before its body was in: nothing to answer."""


class RequestBodyLimits:
    """Read each body whole under a size cap and a deadline, refuse non-UTF-8 ones, then hand it to the app."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, body_timeout_s: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            body = await self._body(scope, receive)
        except _Refused as refusal:
            await _refuse(send, refusal)
            return
        except _Disconnected:
            return
        await self.app(scope, _replayed(body, receive), send)

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        declared_bytes = _content_length(scope)
        if declared_bytes is not None and declared_bytes > self.max_body_bytes:
            if _asks_to_close(scope):  # the server closes right after the answer: read the body first
                await self._drain(receive)
            raise _Refused(413, too_large_message(self.max_body_bytes))
        with anyio.move_on_after(self.body_timeout_s) as deadline:
            body = await self._read(receive)
        if deadline.cancelled_caught:
            raise _Refused(408, too_slow_message(self.body_timeout_s), close=True)
        if body and not _is_utf8_text(body):
            raise _Refused(422, not_utf8_message())
        if body and _has_non_finite_number(body):
            raise _Refused(422, NON_FINITE_MESSAGE)
        return body

    async def _drain(self, receive: Receive) -> None:
        """Read and drop a body, within the body deadline: closing with unread bytes resets the connection,
        and the client, still sending, would never see the answer."""
        with anyio.move_on_after(self.body_timeout_s):
            while True:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        received_bytes = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            received_bytes += len(chunk)
            if received_bytes > self.max_body_bytes:
                raise _Refused(413, too_large_message(self.max_body_bytes))
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _is_utf8_text(body: bytes) -> bool:
    # a NUL byte never belongs in JSON text, but it is valid UTF-8: it is how UTF-16/32 of ASCII looks
    if b"\x00" in body:
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class _NonFinite(Exception):
    pass


def _reject_non_finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e400 reads as inf
        raise _NonFinite
    return number


def _reject_constant(name: str) -> float:
    raise _NonFinite  # NaN, Infinity, -Infinity: Python's json reads them, JSON has no such numbers


def _has_non_finite_number(body: bytes) -> bool:
    """Whether the body holds NaN, Infinity or a number too large for a float; bodies that are not JSON at
    all are left to the app's own JSON error."""
    try:
        json.loads(body, parse_constant=_reject_constant, parse_float=_reject_non_finite)
    except _NonFinite:
        return True
    except (ValueError, RecursionError):
        return False
    return False


def _replayed(body: bytes, receive: Receive) -> Receive:
    """The body already read, as one message; then whatever the server sends next (a disconnect)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _refuse(send: Send, refusal: _Refused) -> None:
    body = json.dumps({"field": "body", "message": refusal.message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if refusal.close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _asks_to_close(scope: Scope) -> bool:
    return any(name == b"connection" and b"close" in value.lower() for name, value in scope.get("headers", []))


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
