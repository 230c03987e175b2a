"""A TCP server that binds before it serves: the socket half the Kafka listener and the HTTP
endpoint share.

A node binds every address before it opens its data, so a port in use stops the start before
anything is read or written; connections wait in the backlog until :meth:`BoundServer.start`.
The address actually bound (port 0 resolved) is what tests and the advertised listeners use.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable

__all__ = ["BoundServer"]

ClientHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

_ASYNCIO_DEFAULT_BACKLOG = 100


class BoundServer:
    """Binds ``host``:``port`` (TLS when ``ssl_context`` is given) and hands each connection to
    ``handle`` once started."""

    def __init__(
        self,
        handle: ClientHandler,
        address: tuple[str, int],
        *,
        ssl_context: ssl.SSLContext | None = None,
        backlog: int = _ASYNCIO_DEFAULT_BACKLOG,
    ) -> None:
        self._handle = handle
        self.address = address
        """The address to bind, as configured (port 0 asks the kernel for a free one)."""
        self.ssl_context = ssl_context
        self._backlog = backlog
        self._server: asyncio.Server | None = None
        self.bound: tuple[str, int] | None = None
        """The address actually bound, once :meth:`bind` has run."""

    async def bind(self) -> tuple[str, int]:
        """Bind without serving yet (a no-op once bound); returns the address actually bound."""
        if self.bound is None:
            host, port = self.address
            self._server = await asyncio.start_server(
                self._handle,
                host,
                port,
                reuse_address=True,
                ssl=self.ssl_context,
                start_serving=False,
                backlog=self._backlog,
            )
            sockname = self._server.sockets[0].getsockname()
            self.bound = (str(sockname[0]), int(sockname[1]))
        return self.bound

    async def start(self) -> tuple[str, int]:
        """Bind (if not yet bound) and start serving; returns the address actually bound."""
        bound = await self.bind()
        assert self._server is not None
        await self._server.start_serving()
        return bound

    def close(self) -> None:
        """Stop accepting (connections already taken are their owner's to end)."""
        if self._server is not None:
            self._server.close()
