"""One log segment's bookkeeping: offsets, sparse indexes and timestamps, engine-neutral.

A segment's bytes live behind :class:`SegmentData` (a file or a bytearray); everything else
here is in memory and shared by both engines, so the file and memory engines place, index and
find batches with the same code.

Appending is two-phase because the file engine writes off the event loop: :meth:`Segment.plan`
reserves the position and decides the index entries when the offset is assigned, and
:meth:`Segment.apply` makes the batch visible once its bytes are written. Rebuilding a segment
after a crash replays plan+apply over the stored batches (:func:`scan_segment`): loading is the
same code as live operation.

Indexes follow Kafka: after every ``index_interval_bytes`` of data the next batch gets an
offset-index entry (its base offset -> its position) and, when the segment's largest timestamp
grew, a time-index entry (largest timestamp so far -> base offset of the batch that holds it).
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from typing import NamedTuple, Protocol

from kcoord.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, iter_batches, parse_header

__all__ = ["Placement", "Segment", "SegmentData", "scan_segment"]

_WALK_CHUNK = 8192
_SCAN_CHUNK = 8 << 20
_PROGRESS_EVERY = 256 << 20
_LENGTH = struct.Struct(">i")
MAX_RELATIVE_OFFSET = 2**31 - 1


class SegmentData(Protocol):
    """Where a segment's bytes live."""

    def read_at(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (fewer at the end)."""


class Placement(NamedTuple):
    """Where an appended batch goes and which index entries it brings (a named tuple, not a frozen
    dataclass: one is made per append, and a frozen dataclass's constructor sets each field through
    ``object.__setattr__``)."""

    position: int
    size: int
    base_offset: int
    next_offset: int
    max_timestamp: int
    indexed: bool
    """Whether the batch gets an offset-index entry (base offset -> position)."""
    time_entry: tuple[int, int] | None
    """(timestamp, offset) for the time index, or None."""


class Segment:
    """A run of batches starting at ``base_offset``: metadata, sparse indexes, lookups."""

    def __init__(
        self, base_offset: int, data: SegmentData, index_interval_bytes: int, created_ms: int
    ) -> None:
        self.base_offset = base_offset
        self.data = data
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        # Visible state: what has been written and may be read.
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.index_offsets = array("q")
        self.index_positions = array("q")
        self.time_timestamps = array("q")
        self.time_offsets = array("q")
        # Assigned state: includes batches planned but not yet written.
        self.assigned_size = 0
        self._bytes_since_index = 0
        self._running_max_timestamp = -1
        self._running_max_offset = -1
        self._time_indexed_max = -1

    def plan(self, base_offset: int, next_offset: int, max_timestamp: int, size: int) -> Placement:
        """Reserve room for a batch at the end of the segment."""
        indexed = self._bytes_since_index > self.index_interval_bytes
        if max_timestamp > self._running_max_timestamp:
            self._running_max_timestamp = max_timestamp
            self._running_max_offset = base_offset
        time_entry = None
        if indexed:
            self._bytes_since_index = 0
            time_entry = self._next_time_entry()
        placement = Placement(
            self.assigned_size, size, base_offset, next_offset, max_timestamp, indexed, time_entry
        )
        self.assigned_size += size
        self._bytes_since_index += size
        return placement

    def seal(self) -> tuple[int, int] | None:
        """The final time-index entry written when the segment stops being active (as Kafka does)."""
        return self._next_time_entry()

    def _next_time_entry(self) -> tuple[int, int] | None:
        if self._running_max_timestamp > self._time_indexed_max:
            self._time_indexed_max = self._running_max_timestamp
            return (self._running_max_timestamp, self._running_max_offset)
        return None

    def apply(self, placement: Placement) -> None:
        """Make a planned batch visible: its bytes are now stored."""
        if placement.indexed:
            self.index_offsets.append(placement.base_offset)
            self.index_positions.append(placement.position)
        if placement.time_entry is not None:
            self.add_time_entry(placement.time_entry)
        self.size = placement.position + placement.size
        self.next_offset = placement.next_offset
        if placement.max_timestamp > self.max_timestamp:
            self.max_timestamp = placement.max_timestamp
            self.offset_of_max_timestamp = placement.base_offset

    def add_time_entry(self, entry: tuple[int, int]) -> None:
        self.time_timestamps.append(entry[0])
        self.time_offsets.append(entry[1])

    def load_state(
        self,
        size: int,
        next_offset: int,
        offset_index: list[tuple[int, int]],
        time_index: list[tuple[int, int]],
    ) -> None:
        """Adopt the state of a sealed segment from its index files (no scan)."""
        self.size = self.assigned_size = size
        self.next_offset = next_offset
        for offset, position in offset_index:
            self.index_offsets.append(offset)
            self.index_positions.append(position)
        for timestamp, offset in time_index:
            self.add_time_entry((timestamp, offset))
        if time_index:
            self.max_timestamp, self.offset_of_max_timestamp = time_index[-1]
            self._running_max_timestamp, self._running_max_offset = time_index[-1]
            self._time_indexed_max = time_index[-1][0]

    # Lookups over visible data.

    def position_of(self, offset: int) -> int:
        """Position of the batch holding ``offset`` (``size`` when past the segment's end)."""
        i = bisect_right(self.index_offsets, offset) - 1
        start = self.index_positions[i] if i >= 0 else 0
        for position, header in self.walk(start):
            if header.last_offset >= offset:
                return position
        return self.size

    def base_offset_at(self, position: int) -> int | None:
        """Base offset of the batch starting at ``position``; None at the end."""
        if position >= self.size:
            return None
        return parse_header(self.data.read_at(position, HEADER_SIZE)).base_offset

    def walk(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the visible batches from ``position`` on, read in small chunks."""
        while position + HEADER_SIZE <= self.size:
            chunk = self.data.read_at(position, min(_WALK_CHUNK, self.size - position))
            at = 0
            while at + HEADER_SIZE <= len(chunk):
                header = parse_header(chunk, at)
                yield position + at, header
                at += header.size
            if at == 0:
                return
            position += at

    def read_batches(self, position: int, max_bytes: int) -> bytes:
        """Whole batches from ``position`` up to ``max_bytes``; at least the first one (KIP-74)."""
        available = self.size - position
        if available <= 0:
            return b""
        buf = self.data.read_at(position, min(max(max_bytes, LOG_OVERHEAD), available))
        end = 0
        while end + LOG_OVERHEAD <= len(buf):
            (length,) = _LENGTH.unpack_from(buf, end + 8)
            if end + LOG_OVERHEAD + length > len(buf):
                break
            end += LOG_OVERHEAD + length
        if end == 0:
            (length,) = _LENGTH.unpack_from(buf, 8)
            return self.data.read_at(position, LOG_OVERHEAD + length)
        return buf if end == len(buf) else buf[:end]

    def find_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(base offset, max timestamp) of the first batch here with max timestamp >= ``timestamp_ms``."""
        if self.max_timestamp < timestamp_ms:
            return None
        i = bisect_left(self.time_timestamps, timestamp_ms) - 1
        start_offset = self.time_offsets[i] if i >= 0 else self.base_offset
        for _, header in self.walk(self.position_of(start_offset)):
            if header.max_timestamp >= timestamp_ms:
                return header.base_offset, header.max_timestamp
        return None


def scan_segment(
    base_offset: int,
    data: SegmentData,
    end: int,
    *,
    index_interval_bytes: int,
    created_ms: int,
    verify_crc: bool,
    progress: Callable[[int], None] | None = None,
) -> Segment:
    """Rebuild a segment's state by reading its batches up to ``end`` bytes.

    Stops at the first torn, corrupt (with ``verify_crc``) or out-of-sequence batch (one whose
    offsets go backwards; gaps are fine, compaction leaves them); the returned segment's ``size``
    is where the valid data ends.
    """
    segment = Segment(base_offset, data, index_interval_bytes, created_ms)
    position = 0
    wanted = _SCAN_CHUNK
    next_report = _PROGRESS_EVERY
    while position < end:
        chunk = data.read_at(position, min(wanted, end - position))
        consumed = 0
        for at, header in iter_batches(chunk, verify_crc=verify_crc):
            if header.base_offset < segment.next_offset:
                return segment
            segment.apply(
                segment.plan(header.base_offset, header.next_offset, header.max_timestamp, header.size)
            )
            consumed = at + header.size
        if consumed == 0:
            big = _oversized_batch(chunk)
            if big is None or big <= len(chunk) or position + big > end:
                return segment
            wanted = big
            continue
        wanted = _SCAN_CHUNK
        position += consumed
        if progress is not None and position >= next_report:
            progress(position)
            next_report += _PROGRESS_EVERY
    return segment


def _oversized_batch(chunk: bytes) -> int | None:
    """The size of the batch starting ``chunk`` when only its beginning fits in the chunk."""
    if len(chunk) < HEADER_SIZE or chunk[16] != 2:
        return None
    (length,) = _LENGTH.unpack_from(chunk, 8)
    return LOG_OVERHEAD + int(length)
