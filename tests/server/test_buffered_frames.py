"""Frames complete in the stream reader's buffer are taken without waiting, exactly as read() reads them."""

from __future__ import annotations

import asyncio
import socket
import struct

from kcoord.server.frames import SMALL_FRAME_BYTES, FrameReader
from kcoord.server.limits import ServerLimits


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


_WRITERS: list[asyncio.StreamWriter] = []
"""Kept referenced: a collected StreamWriter closes its transport."""


async def _connected_reader(limit: int = 2**16) -> tuple[asyncio.StreamReader, socket.socket]:
    """A StreamReader over one end of a real socket pair; the other end is returned to write to."""
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours, limit=limit)
    _WRITERS.append(writer)
    return reader, theirs


async def _buffered(reader: asyncio.StreamReader, size: int) -> None:
    """Waits until the reader holds ``size`` bytes (the bytes sent have arrived)."""
    for _ in range(200):
        if len(reader._buffer) >= size:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{size} bytes never arrived")


async def test_buffered_frames_are_taken_in_order_and_a_partial_one_is_left() -> None:
    """Whole frames come out in order without a wait; a frame still arriving is left to read()."""
    reader, peer = await _connected_reader()
    wire = _frame(b"first") + _frame(b"") + _frame(b"third") + _frame(b"fourth")[:6]
    peer.sendall(wire)
    await _buffered(reader, len(wire))
    frames = FrameReader(
        reader, max_request_bytes=1 << 20, limits=ServerLimits.unlimited(), peer="test", turn_s=60
    )
    assert [frames.take_buffered(), frames.take_buffered(), frames.take_buffered()] == [
        b"first",
        b"",
        b"third",
    ]
    assert frames.take_buffered() is None
    peer.sendall(_frame(b"fourth")[6:])
    assert await frames.read() == b"fourth"
    peer.close()


async def test_large_oversized_and_late_frames_are_left_to_read() -> None:
    """A frame above the small-frame size or the request limit, or one past the connection's turn,
    is not taken: read() applies the memory pool, the limit and the yield to it."""
    reader, peer = await _connected_reader(limit=1 << 22)
    limits = ServerLimits.unlimited()
    too_big = _frame(b"x" * 101)
    peer.sendall(too_big)
    await _buffered(reader, len(too_big))
    frames = FrameReader(reader, max_request_bytes=100, limits=limits, peer="test", turn_s=60)
    assert frames.take_buffered() is None
    reader._buffer.clear()

    large = _frame(b"y" * (SMALL_FRAME_BYTES + 1))
    peer.sendall(large)
    await _buffered(reader, len(large))
    frames = FrameReader(reader, max_request_bytes=1 << 22, limits=limits, peer="test", turn_s=60)
    assert frames.take_buffered() is None
    assert await frames.read() == b"y" * (SMALL_FRAME_BYTES + 1)

    small = _frame(b"z")
    peer.sendall(small)
    await _buffered(reader, len(small))
    frames = FrameReader(reader, max_request_bytes=1 << 22, limits=limits, peer="test", turn_s=-1.0)
    assert frames.take_buffered() is None  # the turn is over: read() yields first
    assert await frames.read() == b"z"
    peer.close()


async def test_a_paused_transport_is_resumed_once_the_buffer_drains() -> None:
    """Taking frames resumes a transport the reader paused for a full buffer, as readexactly does."""
    reader, peer = await _connected_reader(limit=64)
    burst = b"".join(_frame(bytes([i]) * 40) for i in range(8))
    peer.sendall(burst)
    await _buffered(reader, 2 * 64 + 1)
    frames = FrameReader(
        reader, max_request_bytes=1 << 20, limits=ServerLimits.unlimited(), peer="test", turn_s=60
    )
    assert reader._paused
    taken = []
    while (frame := frames.take_buffered()) is not None:
        taken.append(frame)
    assert not reader._paused
    while len(taken) < 8:
        frame = frames.take_buffered() or await frames.read()
        assert frame is not None
        taken.append(frame)
    assert taken == [bytes([i]) * 40 for i in range(8)]
    peer.close()


async def test_a_connection_with_nothing_buffered_waits_for_bytes_then_takes_the_frame() -> None:
    """With nothing buffered the waiter is woken by the next bytes; with bytes buffered there is none."""
    reader, peer = await _connected_reader()
    frames = FrameReader(
        reader, max_request_bytes=1 << 20, limits=ServerLimits.unlimited(), peer="test", turn_s=60
    )
    wake = frames.bytes_waiter()
    assert wake is not None and not wake.done()
    peer.sendall(_frame(b"beat"))
    await asyncio.wait_for(wake, 5)
    frames.stop_waiting(wake)
    assert frames.bytes_waiter() is None  # bytes are buffered: take or read them
    assert frames.take_buffered() == b"beat"
    peer.close()


async def test_a_frame_still_arriving_after_the_wait_is_left_to_read() -> None:
    """Bytes of a partial frame end the wait; the frame is then read (under its deadline), not taken."""
    reader, peer = await _connected_reader()
    frames = FrameReader(
        reader, max_request_bytes=1 << 20, limits=ServerLimits.unlimited(), peer="test", turn_s=60
    )
    wake = frames.bytes_waiter()
    assert wake is not None
    whole = _frame(b"trickled")
    peer.sendall(whole[:6])
    await asyncio.wait_for(wake, 5)
    frames.stop_waiting(wake)
    assert frames.take_buffered() is None
    assert frames.bytes_waiter() is None
    reading = asyncio.ensure_future(frames.read())
    peer.sendall(whole[6:])
    assert await asyncio.wait_for(reading, 5) == b"trickled"
    peer.close()


async def test_the_end_of_the_stream_ends_the_wait_and_read_reports_it() -> None:
    """A peer that closes between frames wakes the waiter; then there is nothing to wait on and read()
    says the stream ended cleanly."""
    reader, peer = await _connected_reader()
    frames = FrameReader(
        reader, max_request_bytes=1 << 20, limits=ServerLimits.unlimited(), peer="test", turn_s=60
    )
    wake = frames.bytes_waiter()
    assert wake is not None
    peer.close()
    await asyncio.wait_for(wake, 5)
    frames.stop_waiting(wake)
    assert frames.take_buffered() is None
    assert frames.bytes_waiter() is None
    assert await frames.read() is None


async def test_a_cancelled_wait_leaves_the_reader_waitable() -> None:
    """Cancelling the wait (a shutdown) clears the reader's waiter, so the stream reader still works."""
    reader, peer = await _connected_reader()
    frames = FrameReader(
        reader, max_request_bytes=1 << 20, limits=ServerLimits.unlimited(), peer="test", turn_s=60
    )
    wake = frames.bytes_waiter()
    assert wake is not None
    wake.cancel()
    frames.stop_waiting(wake)
    peer.sendall(_frame(b"after"))
    assert await asyncio.wait_for(frames.read(), 5) == b"after"
    peer.close()
