"""The Kafka listener: accepts connections and hands each one to a :class:`Connection`."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import ssl

import structlog

from kcoord.security.sasl import SaslSession, SaslSettings
from kcoord.security.tls import certificate_principal
from kcoord.server.bound_server import BoundServer
from kcoord.server.connection import Connection, FrameHandler
from kcoord.server.context import ConnectionInfo
from kcoord.server.limits import ServerLimits
from kcoord.server.router import Router
from kcoord.server.sasl_gate import SaslGate

log = structlog.get_logger(__name__)


class Listener:
    def __init__(
        self,
        router: Router,
        host: str,
        port: int,
        *,
        max_request_bytes: int,
        idle_timeout_s: float,
        backlog: int = 4096,
        name: str = "PLAINTEXT",
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslSettings | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        self.name = name
        self.security_protocol = security_protocol
        self._socket = BoundServer(self._accept, (host, port), ssl_context=ssl_context, backlog=backlog)
        """``backlog``: ``socket.listen.backlog.size``, connects the kernel queues before accepting."""
        self._sasl = sasl
        self._router = router
        self.limits = limits or ServerLimits.unlimited()
        self._max_request_bytes = max_request_bytes
        self._idle_timeout_s = idle_timeout_s
        self._ids = itertools.count(1)
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The address this listener is configured to bind (port 0 before it is bound)."""
        return self._socket.address

    @property
    def bound(self) -> tuple[str, int] | None:
        """The address actually bound, once :meth:`bind` has run."""
        return self._socket.bound

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    async def bind(self) -> tuple[str, int]:
        """Bind without accepting yet; returns the address actually bound (port 0 resolved).

        A node binds every address before it opens its data (:mod:`kcoord.server.bound_server`).
        """
        return await self._socket.bind()

    async def start(self) -> tuple[str, int]:
        """Bind (if not yet bound) and start accepting; returns the address actually bound."""
        bound = await self._socket.start()
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_idle())
        return bound

    async def stop_accepting(self) -> None:
        self._socket.close()
        if self._sweeper is not None:
            self._sweeper.cancel()

    async def _sweep_idle(self) -> None:
        period = min(max(self._idle_timeout_s / 4, 0.05), 10.0)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(period)
            now = loop.time()
            for connection in list(self._connections.values()):
                connection.close_if_idle(now)

    def stop_reading(self) -> None:
        """Every connection stops taking requests; what it already read is still answered."""
        for connection in self._connections.values():
            connection.begin_shutdown()

    async def drain(self, timeout_s: float) -> None:
        """Let open connections answer what they read for up to ``timeout_s``, then cancel them."""
        self.stop_reading()
        if self._connections:
            _, pending = await asyncio.wait(set(self._connections), timeout=timeout_s)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        if not self.limits.connections.admit(str(peer[0])):
            writer.close()
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.limits.size_buffers(sock)
        info = ConnectionInfo(
            next(self._ids),
            str(peer[0]),
            int(peer[1]),
            listener_name=self.name,
            security_protocol=self.security_protocol,
        )
        handler: FrameHandler = self._router
        if self._socket.ssl_context is not None:
            info.principal = certificate_principal(writer.get_extra_info("peercert")) or info.principal
        if self._sasl is not None:
            info.sasl = SaslSession(self._sasl, f"{info.client_host}:{info.client_port}")
            handler = SaslGate(self._router, info.sasl, writer)
        connection = Connection(
            reader,
            writer,
            handler,
            info,
            max_request_bytes=self._max_request_bytes,
            idle_timeout_s=self._idle_timeout_s,
            limits=self.limits,
        )
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = connection
        try:
            await connection.run()
        finally:
            self._connections.pop(task, None)
            self.limits.connections.release(info.client_host)
