"""The observability HTTP listener: ``/metrics``, ``/v1/groups`` and ``/v1/groups/{group}``.

A deliberately tiny HTTP/1.1 server on asyncio streams (no new dependency): GET only, one
request per connection (``Connection: close``), bounded request head, bounded time to send it.
Handlers are synchronous functions of the path that read in-memory state on the event loop, so
they never block it for long and always see a consistent snapshot. Optionally served over TLS and
behind HTTP Basic authentication (an ``authorize`` callback given the ``Authorization`` header).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import structlog

from kcoord.server.bound_server import BoundServer

log = structlog.get_logger(__name__)

MAX_HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT_S = 10.0

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
}


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def json(value: Any, status: int = 200) -> HttpResponse:
        return HttpResponse(status, json.dumps(value, indent=1).encode() + b"\n", "application/json")


Route = Callable[[str], HttpResponse | None]
"""``route(path) -> response``, None when the path is not this route's."""

Authorize = Callable[[str | None], Awaitable[bool]]
"""``authorize(authorization_header) -> allowed``."""

_UNAUTHORIZED = HttpResponse(
    401, b"authentication required\n", headers=(("WWW-Authenticate", 'Basic realm="kcoord"'),)
)


class HttpEndpoint:
    """Serves GET requests by asking each route in turn; 404 when none answers."""

    def __init__(
        self,
        host: str,
        port: int,
        routes: list[Route],
        *,
        ssl_context: ssl.SSLContext | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        self._socket = BoundServer(self._serve, (host, port), ssl_context=ssl_context)
        self._authorize = authorize
        self._routes = routes
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def bound(self) -> tuple[str, int] | None:
        """The address actually bound, once :meth:`bind` has run."""
        return self._socket.bound

    async def bind(self) -> tuple[str, int]:
        """Bind without serving yet (see :mod:`kcoord.server.bound_server`); returns the address
        actually bound (port 0 resolved)."""
        return await self._socket.bind()

    async def start(self) -> tuple[str, int]:
        """Bind (if not yet bound) and start serving; returns the address actually bound."""
        return await self._socket.start()

    async def stop(self) -> None:
        self._socket.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def respond(self, method: str, target: str) -> HttpResponse:
        """The response to one request (also what the tests call directly)."""
        if method not in ("GET", "HEAD"):
            return HttpResponse(405, b"only GET\n")
        path = unquote(urlsplit(target).path)
        for route in self._routes:
            try:
                response = route(path)
            except Exception:
                log.exception("http.route_failed", path=path)
                return HttpResponse(500, b"internal error\n")
            if response is not None:
                return response
        return HttpResponse(404, b"not found\n")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            response, method = await self._read_and_answer(reader)
            head = (
                f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Unknown')}\r\n"
                f"Content-Type: {response.content_type}\r\n"
                f"Content-Length: {len(response.body)}\r\n"
                + "".join(f"{name}: {value}\r\n" for name, value in response.headers)
                + "Connection: close\r\n\r\n"
            ).encode("latin-1")
            writer.write(head if method == "HEAD" else head + response.body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except asyncio.CancelledError:
            # stop() cancels open connections. The task must still end normally: Python 3.11's
            # start_server callback calls task.exception(), which raises for a cancelled task and
            # prints an "Exception in callback" traceback at every shutdown with a connection open.
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    async def _read_and_answer(self, reader: asyncio.StreamReader) -> tuple[HttpResponse, str]:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            return HttpResponse(400, b"request head too large\n"), "GET"
        if len(head) > MAX_HEAD_BYTES:
            return HttpResponse(400, b"request head too large\n"), "GET"
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return HttpResponse(400, b"bad request line\n"), "GET"
        if self._authorize is not None and not await self._authorize(_header(head, "authorization")):
            return _UNAUTHORIZED, parts[0]
        return self.respond(parts[0], parts[1]), parts[0]


def _header(head: bytes, name: str) -> str | None:
    """The value of header ``name`` (lower case) in a request head, None when absent."""
    for line in head.split(b"\r\n")[1:]:
        key, sep, value = line.decode("latin-1").partition(":")
        if sep and key.strip().lower() == name:
            return value.strip()
    return None
