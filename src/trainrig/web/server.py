"""The app under uvicorn, with the limits only the HTTP server can set.

- The listening socket is bound here, before uvicorn starts, so a busy port is one sentence that names
  it (a TrainrigError: exit 2) rather than uvicorn's log line and exit 3.
- A client has `header_timeout_s` to send a request's head, from the moment it connects or its previous
  answer went out: uvicorn's h11 server waits forever for a head that trickles in a byte at a time
  (its keep-alive timer is cancelled by any byte). The body's own deadline is the app's
  (`limits.RequestBodyLimits`), and idle keep-alive connections close after `keep_alive_s`.
"""

from __future__ import annotations

import asyncio
import errno
import socket

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from trainrig.errors import TrainrigError
from trainrig.web.settings import Settings

__all__ = ["bound_socket", "uvicorn_server", "HeadDeadlineH11"]

REQUEST_TIMEOUT_408 = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                       b"connection: close\r\ncontent-length: 46\r\n\r\n"
                       b"request head: not received within the limit.\r\n")


def bound_socket(host: str, port: int) -> socket.socket:
    """A socket listening on host:port, or a TrainrigError naming the port when it cannot be had."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        message = f"'{host}' is not an address this machine can listen on ({error.strerror})."
        raise TrainrigError("host", message) from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: restarts reuse the port
        sock.bind(address)
        sock.listen(2048)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise TrainrigError("port", f"{port} is already in use on {host}; stop what listens there or "
                                        "choose another --port.") from None
        raise TrainrigError("port", f"cannot listen on {host}:{port} ({error.strerror}).") from None
    sock.set_inheritable(True)
    return sock


class HeadDeadlineH11(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose next request head is not in within the deadline."""

    header_timeout_s: float = 10.0
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_deadline()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        self._cancel_head_deadline()
        if not self.transport.is_closing():
            self._head_deadline = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _cancel_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return  # a request is being answered: its body has the app's deadline
        if self.conn.trailing_data[0]:  # part of a head arrived: say why the connection closes
            self.transport.write(REQUEST_TIMEOUT_408)
        self.transport.close()


def uvicorn_server(app: object, settings: Settings) -> uvicorn.Server:
    """A uvicorn server for `app` with the settings' connection limits; run it with `.run(sockets=[...])`."""
    protocol = type("HeadDeadlineH11", (HeadDeadlineH11,), {"header_timeout_s": settings.header_timeout_s})
    config = uvicorn.Config(app, http=protocol, timeout_keep_alive=settings.keep_alive_s, log_level="warning")
    return uvicorn.Server(config)
