"""A PostgreSQL segment: an index of every batch in memory, the bytes in the database (and the cache).

A segment in the file engine finds a batch by walking headers in its bytes from a sparse index
entry. Here the bytes are usually not at hand, so the segment keeps one entry per batch (position,
base offset, last offset, max timestamp: 32 bytes) and answers every lookup from those arrays:
where an offset's batch starts, which batch a timestamp lands in, where the next batch starts.
Positions are the batch's place in the segment's byte stream, as in the other engines, so the
engine-neutral bookkeeping (:class:`~kcoord.storage.segment.Segment`) is unchanged.

Built from ``log_batches`` rows without their ``data`` (:func:`segment_from_rows`), so opening a
partition reads its index only.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from kcoord.storage.postgres.batch_cache import new_segment_token
from kcoord.storage.segment import Placement, Segment

__all__ = ["BatchSpan", "ColdSegmentData", "PostgresSegment", "segment_from_rows"]

BatchSpan = tuple[int, int, int]
"""(index in the segment, position, size) of one batch."""


class ColdSegmentData:
    """The segment's bytes are in PostgreSQL: nothing is read through this (see :class:`PostgresSegment`)."""

    def read_at(self, position: int, size: int) -> bytes:
        raise RuntimeError("a PostgreSQL segment's bytes are read through its log, not its data")


class PostgresSegment(Segment):
    """A segment whose every batch is indexed in memory; see the module docstring."""

    def __init__(self, base_offset: int, index_interval_bytes: int, created_ms: int) -> None:
        super().__init__(base_offset, ColdSegmentData(), index_interval_bytes, created_ms)
        self.token = new_segment_token()
        """The segment's key in the store's :class:`~kcoord.storage.postgres.batch_cache.BatchCache`."""
        self.batch_positions = array("q")
        self.batch_base_offsets = array("q")
        self.batch_last_offsets = array("q")
        self.batch_max_timestamps = array("q")

    def apply(self, placement: Placement) -> None:
        super().apply(placement)
        self.batch_positions.append(placement.position)
        self.batch_base_offsets.append(placement.base_offset)
        self.batch_last_offsets.append(placement.next_offset - 1)
        self.batch_max_timestamps.append(placement.max_timestamp)

    @property
    def batch_count(self) -> int:
        return len(self.batch_positions)

    def batch_size(self, index: int) -> int:
        following = self.batch_positions[index + 1] if index + 1 < len(self.batch_positions) else self.size
        return following - self.batch_positions[index]

    def position_of(self, offset: int) -> int:
        index = bisect_left(self.batch_last_offsets, offset)
        return self.batch_positions[index] if index < len(self.batch_positions) else self.size

    def base_offset_at(self, position: int) -> int | None:
        index = bisect_left(self.batch_positions, position)
        if index < len(self.batch_positions) and self.batch_positions[index] == position:
            return self.batch_base_offsets[index]
        return None

    def find_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        if self.max_timestamp < timestamp_ms:
            return None
        # The time index names a batch at or before the first one that can match (as in Segment).
        entry = bisect_left(self.time_timestamps, timestamp_ms) - 1
        start_offset = self.time_offsets[entry] if entry >= 0 else self.base_offset
        for index in range(bisect_left(self.batch_base_offsets, start_offset), len(self.batch_positions)):
            max_timestamp = self.batch_max_timestamps[index]
            if max_timestamp >= timestamp_ms:
                return self.batch_base_offsets[index], max_timestamp
        return None

    def spans(self, position: int, max_bytes: int) -> list[BatchSpan]:
        """The whole batches a read from ``position`` returns: up to ``max_bytes``, at least one."""
        index = bisect_left(self.batch_positions, position)
        spans: list[BatchSpan] = []
        total = 0
        while index < len(self.batch_positions):
            size = self.batch_size(index)
            if spans and total + size > max_bytes:
                break
            spans.append((index, self.batch_positions[index], size))
            total += size
            index += 1
        return spans

    def truncated(self, position: int) -> PostgresSegment:
        """A copy holding only the batches before ``position`` (same token: the cache drops the rest)."""
        copy = PostgresSegment(self.base_offset, self.index_interval_bytes, self.created_ms)
        copy.token = self.token
        end = bisect_right(self.batch_positions, position - 1)
        for index in range(end):
            start = self.batch_positions[index]
            next_start = self.batch_positions[index + 1] if index + 1 < end else position
            _apply_row(
                copy,
                self.batch_base_offsets[index],
                self.batch_last_offsets[index],
                self.batch_max_timestamps[index],
                next_start - start,
            )
        return copy


def segment_from_rows(
    base_offset: int,
    created_ms: int,
    rows: Iterable[tuple[int, int, int, int]],
    *,
    index_interval_bytes: int,
) -> PostgresSegment:
    """A segment rebuilt from its (base offset, last offset, max timestamp, size) rows, in offset order:
    the same plan/apply replay as live appends, with no batch bytes."""
    segment = PostgresSegment(base_offset, index_interval_bytes, created_ms)
    for batch_base, batch_last, max_timestamp, size in rows:
        _apply_row(segment, batch_base, batch_last, max_timestamp, size)
    return segment


def _apply_row(segment: PostgresSegment, base: int, last: int, max_timestamp: int, size: int) -> None:
    segment.apply(segment.plan(base, last + 1, max_timestamp, size))
