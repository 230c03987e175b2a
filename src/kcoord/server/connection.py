"""One client connection: size-prefixed frames in, one request at a time, responses out in order.

As in Apache Kafka (whose network layer mutes a channel until its response is sent), a
connection's next request is processed only once the previous one's response is decided and
written to the transport. So an OffsetFetch pipelined behind an OffsetCommit reads the committed
offset, and a Fetch pipelined behind a Produce sees the produced records. A parked JoinGroup or a
long-polling Fetch holds its own connection and no other.

One exception, for writes that join a write round: a request of a ``pipelined`` API (see
:attr:`kcoord.protocol.registry.ApiSpec.pipelined`: OffsetCommit) that suspends has already
decided its outcome and queued its records in log order; all it waits for is their durability.
While it waits, the connection may start the next buffered request if that is one of the same
kind, up to :data:`MAX_PIPELINED_WRITES` at once, so that a client's pipelined commits share one
fsync round instead of paying one round each (while they wait and nothing more is buffered, the
connection wakes both for their durability and for request bytes arriving meanwhile, so the
client's next commit still joins them). Each write still answers only once its own records
are durable (a failed append answers its error, as it would alone), and the answers go out
strictly in request order. Any other request (an OffsetFetch, a Heartbeat, anything) behind a
waiting write waits until every write before it is answered, so a read on a connection still
sees that connection's writes.

Pipelined requests share one round: frames already complete in the read buffer are taken from it
without waiting (and without a coroutine, see :meth:`FrameReader.take_buffered`), handled one
after another (each still only once the previous one is answered), and their responses are
written together, with one ``send`` for the batch. A response is never held behind
a request that waits: before the connection waits for anything (a handler that suspends, a frame
that must be read rather than taken), the responses already decided are written (so a heartbeat
answer does not wait for a parked JoinGroup behind it). A batch is also cut at
:data:`MAX_BATCH_BYTES` and whenever the transport still holds unsent bytes, so back-pressure works
as without batching. Before a SASL connection has authenticated nothing is batched or pipelined
(the gate closes a failed connection right after its answer).

Back-pressure needs no request queue: while a request is processed nothing is parsed, the stream
reader buffers at most its byte limit before the transport stops reading from the socket, and a
client that does not read its responses stops being served once the transport's write buffer
passes its high-water mark (``drain``). Writes started while earlier ones wait are at most
:data:`MAX_PIPELINED_WRITES` small frames, each a task that holds its request until answered.
This is why kcoord has no ``queued.max.requests``: there is no per-connection queue to bound.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Coroutine, Generator
from typing import Any, Protocol, cast

import structlog

from kcoord.security.sasl import SaslState
from kcoord.server.context import ConnectionInfo
from kcoord.server.frames import SMALL_FRAME_BYTES, FrameReader
from kcoord.server.limits import ServerLimits
from kcoord.server.router import CloseConnectionError

log = structlog.get_logger(__name__)

MAX_BATCH_BYTES = 64 * 1024
"""A batch of pipelined responses is written once it holds this much (a client that pipelines
without reading meets the transport's back-pressure as before, a batch at a time)."""

MAX_PIPELINED_WRITES = 5
"""Writes one connection has waiting for durability at once (the clients' default
``max.in.flight.requests.per.connection``): the next request waits for the oldest answer."""


class FrameHandler(Protocol):
    """What answers a connection's frames: the router, or the SASL gate in front of it."""

    async def handle(self, frame: bytes, connection: ConnectionInfo) -> bytes | None: ...

    @property
    def pipelined_writes(self) -> frozenset[int]:
        """API keys whose requests may start while an earlier one of them waits for durability."""
        ...


class Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        router: FrameHandler,
        info: ConnectionInfo,
        *,
        max_request_bytes: int,
        idle_timeout_s: float,
        limits: ServerLimits | None = None,
    ) -> None:
        self._writer = writer
        self._router = router
        self.info = info
        limits = limits or ServerLimits.unlimited()
        self._unread_answers = limits.unread_answers
        self._frames = FrameReader(
            reader,
            max_request_bytes=max_request_bytes,
            limits=limits,
            peer=info.client_host,
            sasl=info.sasl,
        )
        self._idle_timeout_s = idle_timeout_s
        self._log = log.bind(connection_id=info.connection_id, peer=f"{info.client_host}:{info.client_port}")
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._waiting_for_request = False
        """True while the connection reads its next frame: the one moment shutdown may cancel it."""
        self._shutdown_cancelled = False
        self._handling = False
        self._pending: list[bytes] = []
        """Responses decided but not yet written: the current batch of pipelined requests."""
        self._pending_bytes = 0
        self._pipelined_writes = router.pipelined_writes
        self._writes: deque[asyncio.Future[bytes | None]] = deque()
        """Pipelined writes started and not answered yet, in request order (answers of pipelined
        requests decided at once are here too, as done futures, to keep their place)."""
        self.last_active = asyncio.get_running_loop().time()

    async def run(self) -> None:
        """Serve until the peer closes, a bad frame arrives, or the server stops."""
        self._task = asyncio.current_task()
        try:
            await self._serve()
        except asyncio.CancelledError:
            if not self._shutdown_cancelled:
                raise
            if self._task is not None:
                self._task.uncancel()
        except CloseConnectionError as exc:
            self._log.warning("connection.closed_bad_request", reason=str(exc))
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            self._log.info("connection.lost", reason=type(exc).__name__)
        except Exception:
            self._log.exception("connection.failed")
        finally:
            self._closing = True
            self._frames.done()
            self._abandon_writes()
            self._flush_pending()
            await self._close_transport()
            for callback in self.info.close_callbacks:
                try:
                    callback()
                except Exception:
                    self._log.exception("connection.close_callback_failed")

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        transport = self._writer.transport
        handle = self._router.handle
        frames = self._frames
        pending = self._pending
        writes = self._writes
        pipelined = self._pipelined_writes
        info = self.info
        while not self._closing:
            frame = frames.take_buffered()
            if frame is None:
                if writes:  # answer them as they become durable, or take what arrives meanwhile
                    await self._answer_writes(until_data=True)
                    continue
                if pending:  # a batch ends where the next frame cannot be taken from the buffer
                    self._write_pending()
                wake = frames.bytes_waiter()
                if wake is not None:  # the common case between requests: wait, then take the frame
                    self._waiting_for_request = True
                    try:
                        await wake
                    finally:
                        self._waiting_for_request = False
                        frames.stop_waiting(wake)
                    continue
                frame = await self._next_frame()
                if frame is None:
                    return
            elif writes and (len(writes) >= MAX_PIPELINED_WRITES or not _is_pipelined(frame, pipelined)):
                await self._answer_writes()
            self._handling = True  # the idle sweep leaves a connection alone while it is set
            try:
                answering = handle(frame, info)
                try:
                    yielded = answering.send(None)
                except StopIteration as answered:  # decided without suspending: the common case
                    response = answered.value
                    if writes:  # a pipelined write answered at once: after the ones before it
                        writes.append(_answered(loop, response))
                        continue
                except BaseException:
                    if writes:  # the requests before this one are answered first, as one at a time
                        await self._answer_writes()
                    raise
                else:  # it waits (a write's durability, a parked join): that yields the loop
                    if writes or (
                        len(frame) <= SMALL_FRAME_BYTES
                        and _is_pipelined(frame, pipelined)
                        and frames.next_frame_buffered()
                        and self._may_batch()
                    ):
                        writes.append(loop.create_task(_finish(answering, yielded)))
                        continue
                    if pending:  # the answers before it go out while it waits
                        self._write_pending()
                    response = await _Resumed(answering, yielded)
                    frames.restart_turn()
            finally:
                self._handling = False
                if frames.reserved:
                    frames.done()
            self.last_active = loop.time()
            more = frames.next_frame_buffered()
            if response is not None and not pending and not more:
                transport.write(response)  # a request alone (one in flight): no batch to build
            else:
                if response is not None:
                    pending.append(response)
                    self._pending_bytes += len(response)
                elif not pending:
                    continue
                if (
                    more
                    and self._pending_bytes < MAX_BATCH_BYTES
                    and transport.get_write_buffer_size() == 0
                    and self._may_batch()
                ):
                    continue
                # _write_pending inline, not _send_pending: this runs once per batch on the hot path
                transport.write(pending[0] if len(pending) == 1 else b"".join(pending))
                pending.clear()
                self._pending_bytes = 0
            buffered = transport.get_write_buffer_size()
            if buffered > 0:
                if buffered > transport.get_write_buffer_limits()[1]:
                    self._unread_answers.refused(self.info.client_host, buffered_bytes=buffered)
                await self._writer.drain()
        if writes:
            await self._answer_writes()

    async def _answer_writes(self, *, until_data: bool = False) -> None:
        """Answer the pipelined writes in request order, each once it is durable, and send the answers.

        Answers already decided are written before waiting for the next write, so none is held
        behind one that waits; writes that became durable together are answered with one send.
        With ``until_data`` it also returns as soon as more request bytes arrive, so that a commit
        the client sends meanwhile still joins the writes that wait.
        """
        writes = self._writes
        pending = self._pending
        frames = self._frames
        while writes:
            write = writes[0]
            if not write.done():
                if pending:
                    self._write_pending()
                self._handling = True
                try:
                    if until_data and await frames.data_or(write):
                        break
                    response = await write
                finally:
                    self._handling = False
            else:
                response = write.result()
            writes.popleft()
            if response is not None:
                pending.append(response)
                self._pending_bytes += len(response)
        frames.restart_turn()
        self.last_active = asyncio.get_running_loop().time()
        await self._send_pending()

    async def _send_pending(self) -> None:
        """Write the batch; wait while the client leaves more than the high-water mark unread."""
        if self._pending:
            self._write_pending()
        transport = self._writer.transport
        buffered = transport.get_write_buffer_size()
        if buffered > 0:
            if buffered > transport.get_write_buffer_limits()[1]:
                self._unread_answers.refused(self.info.client_host, buffered_bytes=buffered)
            await self._writer.drain()

    def _abandon_writes(self) -> None:
        """The connection ends: writes still waiting lose their answer (their records stay as the log
        has them), and failures of finished ones are taken so none is reported as never retrieved."""
        for write in self._writes:
            if not write.done():
                write.cancel()
            elif not write.cancelled():
                write.exception()
        self._writes.clear()

    def _may_batch(self) -> bool:
        sasl = self.info.sasl
        return sasl is None or sasl.state is SaslState.AUTHENTICATED

    def _write_pending(self) -> None:
        pending = self._pending
        transport = self._writer.transport
        if len(pending) == 1:
            transport.write(pending[0])
        else:
            transport.write(b"".join(pending))
        pending.clear()
        self._pending_bytes = 0

    def _flush_pending(self) -> None:
        """The connection ends: what is decided still goes out if the transport is open."""
        if self._pending and not self._writer.transport.is_closing():
            self._write_pending()

    async def _next_frame(self) -> bytes | None:
        """The next request frame; None when the peer closed cleanly between frames."""
        self._waiting_for_request = True
        try:
            frame = await self._frames.read()
        finally:
            self._waiting_for_request = False
        if frame is None:
            self._log.debug("connection.closed_by_peer")
        return frame

    def close_if_idle(self, now: float) -> None:
        """Close a connection that has had no request and none in progress for connections.max.idle.ms.

        Checked by the listener's sweeper rather than a timer per read, which would cost a timer
        allocation on every request of the hot path.
        """
        if not self._handling and now - self.last_active > self._idle_timeout_s and not self._closing:
            self._log.info("connection.idle_closed", idle_s=self._idle_timeout_s)
            self.begin_shutdown()

    def begin_shutdown(self) -> None:
        """Stop taking requests: a request in progress is still answered, then the connection closes.

        Only a connection waiting for its next frame is cancelled; one in the middle of a request
        finishes it (bounded by the listener's drain deadline) and then leaves its loop.
        """
        self._closing = True
        if self._waiting_for_request and self._task is not None and not self._shutdown_cancelled:
            self._shutdown_cancelled = True
            self._task.cancel()

    async def _close_transport(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()


def _is_pipelined(frame: bytes, keys: frozenset[int]) -> bool:
    """Whether the frame's API key (its first two bytes) is one of ``keys``."""
    return len(frame) >= 2 and (frame[0] << 8 | frame[1]) in keys


def _answered(loop: asyncio.AbstractEventLoop, response: bytes | None) -> asyncio.Future[bytes | None]:
    answer: asyncio.Future[bytes | None] = loop.create_future()
    answer.set_result(response)
    return answer


async def _finish(answering: Coroutine[Any, Any, bytes | None], yielded: Any) -> bytes | None:
    """A request's coroutine, suspended at ``yielded``, run to its answer by a task of its own."""
    return await _Resumed(answering, yielded)


class _Resumed:
    """Awaits a coroutine the connection has started itself, which yielded ``yielded``.

    The connection starts each request's coroutine by hand to learn whether it suspends (a
    request that waited has let other connections run, so its connection starts a fresh turn,
    see :mod:`kcoord.server.frames`). This passes the first yield to the task and then forwards
    everything between the task and the coroutine, as ``yield from`` does.
    """

    __slots__ = ("_coroutine", "_yielded")

    def __init__(self, coroutine: Coroutine[Any, Any, bytes | None], yielded: Any) -> None:
        self._coroutine = coroutine
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, bytes | None]:
        coroutine, yielded = self._coroutine, self._yielded
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as exc:  # the task throws (a cancellation): into the coroutine
                try:
                    yielded = coroutine.throw(exc)
                except StopIteration as answered:
                    return cast("bytes | None", answered.value)
            else:
                try:
                    yielded = coroutine.send(sent)
                except StopIteration as answered:
                    return cast("bytes | None", answered.value)
