"""One client connection: size-prefixed frames in, responses out in request order.

Requests are handled concurrently (a Fetch long-poll or a parked JoinGroup never stops the
connection from reading), but responses leave in the order the requests arrived, as Kafka's
protocol requires. At most ``queued.max.requests`` requests are in flight; past that the
connection stops reading, which pushes back on the client through TCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct

import structlog

from kcoord.server.context import ConnectionInfo
from kcoord.server.router import CloseConnectionError, Router

log = structlog.get_logger(__name__)

_SIZE = struct.Struct(">i")


class Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        router: Router,
        info: ConnectionInfo,
        *,
        max_request_bytes: int,
        max_in_flight: int,
        idle_timeout_s: float,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._router = router
        self.info = info
        self._max_request_bytes = max_request_bytes
        self._idle_timeout_s = idle_timeout_s
        self._responses: asyncio.Queue[asyncio.Task[bytes | None] | None] = asyncio.Queue(max_in_flight)
        self._log = log.bind(connection_id=info.connection_id, peer=f"{info.client_host}:{info.client_port}")
        self._closing = False
        self._reading: asyncio.Task[None] | None = None
        self._in_flight = 0
        self.last_active = asyncio.get_running_loop().time()

    async def run(self) -> None:
        """Serve until the peer closes, a bad frame arrives, or the server stops."""
        sender = asyncio.create_task(self._send_responses())
        reading = asyncio.create_task(self._read_requests())
        self._reading = reading
        try:
            await reading
        except asyncio.CancelledError:
            if not self._closing:
                reading.cancel()
                raise
        except CloseConnectionError as exc:
            self._log.warning("connection.closed_bad_request", reason=str(exc))
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            self._log.info("connection.lost", reason=type(exc).__name__)
        finally:
            self._closing = True
            with contextlib.suppress(asyncio.QueueFull):
                self._responses.put_nowait(None)
            if self._responses.full():
                sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            await self._close_transport()
            for callback in self.info.close_callbacks:
                try:
                    callback()
                except Exception:
                    self._log.exception("connection.close_callback_failed")

    async def _read_requests(self) -> None:
        while not self._closing:
            try:
                head = await self._reader.readexactly(4)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    raise CloseConnectionError(f"frame size cut off after {len(exc.partial)} bytes") from exc
                self._log.debug("connection.closed_by_peer")
                return
            (size,) = _SIZE.unpack(head)
            if size < 0:
                raise CloseConnectionError(f"negative frame size {size}")
            if size > self._max_request_bytes:
                raise CloseConnectionError(f"frame of {size} bytes exceeds socket.request.max.bytes")
            try:
                frame = await self._reader.readexactly(size)
            except asyncio.IncompleteReadError as exc:
                raise CloseConnectionError(f"frame cut off: {len(exc.partial)} of {size} bytes") from exc
            self.last_active = asyncio.get_running_loop().time()
            self._in_flight += 1
            task = asyncio.create_task(self._router.handle(frame, self.info))
            await self._responses.put(task)

    async def _send_responses(self) -> None:
        while True:
            task = await self._responses.get()
            if task is None:
                return
            try:
                frame = await task
                self._in_flight -= 1
                self.last_active = asyncio.get_running_loop().time()
            except CloseConnectionError as exc:
                self._log.warning("connection.closed_bad_request", reason=str(exc))
                self._abort()
                return
            except Exception:  # never die silently with the connection open and unanswered
                self._log.exception("connection.request_failed")
                self._abort()
                return
            if frame is None:
                continue
            self._writer.write(frame)
            await self._writer.drain()

    def close_if_idle(self, now: float) -> None:
        """Close a connection that has had no request and nothing in flight for connections.max.idle.ms.

        Checked by the listener's sweeper rather than a timer per read, which would cost a timer
        allocation on every request of the hot path.
        """
        if self._in_flight == 0 and now - self.last_active > self._idle_timeout_s and not self._closing:
            self._log.info("connection.idle_closed", idle_s=self._idle_timeout_s)
            self.begin_shutdown()

    def begin_shutdown(self) -> None:
        """Stop reading requests; those already read are answered, then the connection closes."""
        self._closing = True
        if self._reading is not None:
            self._reading.cancel()

    def _abort(self) -> None:
        self._closing = True
        if self._reading is not None:
            self._reading.cancel()
        transport = self._writer.transport
        if not transport.is_closing():
            transport.close()

    async def _close_transport(self) -> None:
        while not self._responses.empty():
            pending = self._responses.get_nowait()
            if pending is not None:
                pending.cancel()
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
