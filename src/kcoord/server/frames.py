"""Reading one request frame under the server's limits.

- ``socket.request.max.bytes``: a larger declared size closes the connection.
- A deadline for the frame to arrive in full once its size is read
  (``kcoord.request.read.timeout.ms``), so a client that trickles a frame (slowloris) is closed
  instead of holding memory and a connection forever. The deadline is armed only while a frame is
  partial: a frame whose bytes are all buffered (every pipelined request, and nearly every small
  one) is read without a timer, so the hot path makes and cancels no timer handle per request.
- ``queued.max.request.bytes``: a frame larger than a small-frame threshold reserves its size from
  the shared :class:`MemoryPool` before its body is read, and keeps it until the request is
  answered. While a frame waits for memory its connection reads nothing, so the kernel's receive
  window fills and the client stops sending. Frames up to the threshold (every heartbeat, commit and
  metadata request) are not reserved: their bytes are already bounded by the stream reader's buffer
  of each connection, and reserving them would let a few large frames starve everyone's heartbeats.
- A frame already complete in the stream reader's buffer is taken from it directly
  (:meth:`FrameReader.take_buffered`), without a coroutine for its size and another for its
  body: the common case of every pipelined request. Anything unusual (a large or oversized frame,
  a turn used up, a stream in error) is left to :meth:`FrameReader.read`.
- A large frame is read in chunks, so the stream reader's own buffer stays small while it arrives.
- Fairness: a client that pipelines requests finds its next frame already buffered, and answers that
  need no I/O (a cached Metadata, say) never suspend, so without a yield one connection would keep
  the event loop until its buffer ran dry (twenty such clients stalled a bystander for seconds).
  A connection whose next frame is already buffered yields before reading it once it has run for
  :data:`TURN_S` since it last waited (a connection that waits for its next frame yields anyway,
  and so does one whose request waited, for a write's durability say: its turn starts again).
- ``sasl.server.max.receive.size``: on a SASL listener, until the connection has authenticated, a
  larger frame closes it (a stranger cannot make the server buffer 100 MB). The lower limit is the
  one compared on the hot path; only a frame above it asks whether authentication lifted it.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kcoord.security.sasl import SaslSession, SaslState
from kcoord.server.limits import ServerLimits
from kcoord.server.router import CloseConnectionError

_SIZE = struct.Struct(">i")
SMALL_FRAME_BYTES = 64 * 1024
"""Frames up to this size are not reserved from the memory pool (the stream reader's own limit)."""
_CHUNK = 1 << 20
TURN_S = 0.001
"""Longest a connection runs requests back to back before it lets other connections run."""
_READER_STATE = ("_waiter", "_eof", "_exception", "_paused", "_maybe_resume_transport")
"""The ``StreamReader`` state :meth:`FrameReader.take_buffered` and :meth:`FrameReader.bytes_waiter`
use, as ``readexactly`` and ``_wait_for_data`` do (resuming a transport paused while the buffer was
over its limit; waiting on the waiter ``feed_data`` wakes)."""


class FrameReader:
    """Reads frames of one connection; :meth:`done` returns a frame's reservation to the pool."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        *,
        max_request_bytes: int,
        limits: ServerLimits,
        peer: str,
        sasl: SaslSession | None = None,
        turn_s: float = TURN_S,
    ) -> None:
        self._reader = reader
        self._turn_s = turn_s
        self._max_request_bytes = max_request_bytes
        self._sasl = sasl
        self._limit = max_request_bytes
        """The size above which a frame is looked at: the pre-authentication limit until authenticated."""
        if sasl is not None:
            self._limit = min(max_request_bytes, sasl.max_receive_bytes)
        self._pool = limits.pool
        self._read_timeout_s = limits.read_timeout_s
        self._peer = peer
        self._timeouts = limits.read_timeouts
        self._oversized = limits.oversized_frames
        self._oversized_before_authentication = limits.oversized_before_authentication
        self._memory_waits = limits.memory_waits
        self.reserved = 0
        """Bytes the frame being answered holds from the memory pool (0 for a small frame)."""
        self._loop = asyncio.get_running_loop()
        self._turn_started = self._loop.time()
        # StreamReader has no public "bytes buffered"; its buffer is one bytearray for its lifetime.
        self._buffered: bytearray | None = getattr(reader, "_buffer", None)
        self._takeable = self._buffered if all(hasattr(reader, name) for name in _READER_STATE) else None
        """The buffer when frames may be taken from it and waited for as the stream reader itself does
        (it has the state below, as ``asyncio.StreamReader`` has); None: every frame is :meth:`read`."""
        self._small_limit = min(SMALL_FRAME_BYTES, self._limit)
        """Frames up to this size may be taken from the buffer; a larger one is :meth:`read`."""

    def next_frame_buffered(self) -> bool:
        """True when the next frame is already complete in the stream reader's buffer."""
        buffered = self._buffered
        if buffered is None or len(buffered) < 4:
            return False
        size: int = _SIZE.unpack_from(buffered)[0]
        return len(buffered) - 4 >= size

    def take_buffered(self) -> bytes | None:
        """The next frame if it is small, complete in the buffer and may be served now; else None
        (then :meth:`read` it). Takes the bytes as ``readexactly`` would, without suspending."""
        buffer = self._takeable
        if buffer is None or len(buffer) < 4:
            return None
        size: int = _SIZE.unpack_from(buffer)[0]
        end = 4 + size
        reader = self._reader
        if (
            size < 0
            or size > self._small_limit
            or len(buffer) < end
            or self._loop.time() - self._turn_started > self._turn_s
            or reader._exception is not None  # type: ignore[attr-defined]
        ):
            return None
        frame = bytes(buffer[4:end])
        del buffer[:end]
        if reader._paused:  # type: ignore[attr-defined]
            reader._maybe_resume_transport()  # type: ignore[attr-defined]
        return frame

    def bytes_waiter(self) -> asyncio.Future[None] | None:
        """A future the stream reader completes when bytes arrive (or the stream ends or fails), for a
        connection with nothing buffered: it waits for its next request on this future alone, without
        a coroutine for the size and another for the body, and then takes the frame with
        :meth:`take_buffered`. None when it cannot wait this way (bytes already buffered, the stream at
        its end, failed, paused or already waited on): then the connection calls :meth:`read`, which
        also arms the deadline of a partial frame. Call :meth:`stop_waiting` once the future is done.
        """
        reader = self._reader
        buffered = self._takeable
        if (
            buffered is None
            or buffered
            or reader._waiter is not None  # type: ignore[attr-defined]
            or reader._eof  # type: ignore[attr-defined]
            or reader._paused  # type: ignore[attr-defined]
            or reader._exception is not None  # type: ignore[attr-defined]
        ):
            return None
        wake: asyncio.Future[None] = self._loop.create_future()
        reader._waiter = wake  # type: ignore[attr-defined]
        return wake

    def stop_waiting(self, wake: asyncio.Future[None]) -> None:
        """The wait on :meth:`bytes_waiter`'s future is over (woken or cancelled): a fresh turn starts."""
        reader = self._reader
        if reader._waiter is wake:  # type: ignore[attr-defined]
            reader._waiter = None  # type: ignore[attr-defined]
        self._turn_started = self._loop.time()

    async def data_or(self, other: asyncio.Future[Any]) -> bool:
        """Wait until more bytes arrive (or the stream ends) or ``other`` is done, whichever is first;
        True when the bytes came first.

        Returns False at once when the stream reader cannot be waited on this way (already at its
        end, failed, paused or waited on): the caller then waits for ``other`` alone. It waits as
        ``StreamReader`` itself does, on the waiter its ``feed_data`` and ``feed_eof`` wake, so no
        task reads in the background.
        """
        reader = self._reader
        if (
            getattr(reader, "_waiter", True) is not None
            or getattr(reader, "_eof", True)
            or getattr(reader, "_paused", True)
            or reader.exception() is not None
        ):
            return False
        wake: asyncio.Future[None] = self._loop.create_future()

        def woken(_: asyncio.Future[Any]) -> None:
            if getattr(reader, "_waiter", None) is wake:  # bytes arriving now must not wake it twice
                reader._waiter = None  # type: ignore[attr-defined]
            if not wake.done():
                wake.set_result(None)

        other.add_done_callback(woken)
        reader._waiter = wake  # type: ignore[attr-defined]
        try:
            await wake
        finally:
            if getattr(reader, "_waiter", None) is wake:
                reader._waiter = None  # type: ignore[attr-defined]
            other.remove_done_callback(woken)
        return not other.done()

    def restart_turn(self) -> None:
        """The connection has just waited (its request suspended): other connections ran meanwhile."""
        self._turn_started = self._loop.time()

    async def read(self) -> bytes | None:
        """The next frame; None when the peer closed cleanly between frames."""
        buffer = self._buffered
        buffered = 1 if buffer is None else len(buffer)
        if buffered and self._loop.time() - self._turn_started > self._turn_s:
            await asyncio.sleep(0)
            self._turn_started = self._loop.time()
        try:
            head = await self._reader.readexactly(4)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise CloseConnectionError(f"frame size cut off after {len(exc.partial)} bytes") from exc
            return None
        if not buffered:
            self._turn_started = self._loop.time()
        (size,) = _SIZE.unpack(head)
        if size < 0:
            raise CloseConnectionError(f"negative frame size {size}")
        if size > self._limit:
            self._check_size(size)
        if size > SMALL_FRAME_BYTES and self._pool is not None:
            await self._reserve(size)
        if buffer is not None and len(buffer) >= size:
            return await self._reader.readexactly(size)
        try:
            async with asyncio.timeout(self._read_timeout_s):
                return await self._read_body(size)
        except TimeoutError as exc:
            self._timeouts.refused(self._peer, frame_bytes=size)
            raise CloseConnectionError(
                f"frame of {size} bytes not received within {self._read_timeout_s:g} s"
            ) from exc
        except asyncio.IncompleteReadError as exc:
            raise CloseConnectionError(f"frame cut off: {len(exc.partial)} of {size} bytes") from exc

    def _check_size(self, size: int) -> None:
        """Closes for a frame above the limit in force; lifts the SASL limit once authenticated."""
        sasl = self._sasl
        if sasl is not None:
            if sasl.state is not SaslState.AUTHENTICATED:
                self._oversized_before_authentication.refused(
                    self._peer, frame_bytes=size, max=sasl.max_receive_bytes
                )
                raise CloseConnectionError(
                    f"frame of {size} bytes before authentication exceeds sasl.server.max.receive.size"
                )
            self._sasl = None
            self._limit = self._max_request_bytes
            self._small_limit = min(SMALL_FRAME_BYTES, self._limit)
        if size > self._max_request_bytes:
            self._oversized.refused(self._peer, frame_bytes=size, max=self._max_request_bytes)
            raise CloseConnectionError(f"frame of {size} bytes exceeds socket.request.max.bytes")

    async def _reserve(self, size: int) -> None:
        assert self._pool is not None
        if self._pool.try_reserve(size):
            self._memory_waits.forgive(self._peer)
        else:
            self._memory_waits.refused(self._peer, frame_bytes=size, in_use=self._pool.used)
            await self._pool.reserve(size)
        self.reserved = size

    async def _read_body(self, size: int) -> bytes:
        if size <= SMALL_FRAME_BYTES:
            return await self._reader.readexactly(size)
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            chunk = await self._reader.read(min(remaining, _CHUNK))
            if not chunk:
                raise asyncio.IncompleteReadError(b"".join(chunks), size)
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def done(self) -> None:
        """The last frame is answered (or abandoned): give its memory back."""
        if self.reserved and self._pool is not None:
            self._pool.release(self.reserved)
        self.reserved = 0
