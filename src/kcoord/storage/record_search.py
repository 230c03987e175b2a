"""Finding one record by its timestamp inside batches read from a log (what ListOffsets needs).

The log's time index finds the *batch*; the answer Kafka gives is the *record*
(``LogSegment.findOffsetByTimestamp``): the first record at or after ``min_offset`` whose
timestamp is >= the target. Only the batches handed in are decoded, normally just the one the
index pointed at, so produce and fetch keep treating batches as opaque bytes.

In a LogAppendTime batch every record carries the batch's time (its max timestamp), as Kafka's
``DefaultRecordBatch`` reports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcoord.protocol.record_batch import BatchHeader, iter_batches
from kcoord.storage.compaction_records import decode_records

__all__ = ["FoundRecord", "SearchEnd", "first_record_at_or_after", "first_record_with_timestamp"]


@dataclass(frozen=True, slots=True)
class FoundRecord:
    offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class SearchEnd:
    """Nothing matched in the batches given; the search may go on from ``next_offset``."""

    next_offset: int


def first_record_at_or_after(
    batches: bytes, timestamp_ms: int, *, min_offset: int = 0
) -> FoundRecord | SearchEnd | None:
    """The first record with offset >= ``min_offset`` and timestamp >= ``timestamp_ms``.

    Batches whose max timestamp is below the target are skipped without decoding. None when
    ``batches`` holds no whole batch or the batch cannot be decoded here (a codec whose library
    is missing): the caller then answers with the batch as a whole.
    """
    next_offset = -1
    for position, header in iter_batches(batches):
        next_offset = header.next_offset
        if header.max_timestamp < timestamp_ms or header.last_offset < min_offset:
            continue
        timestamps = _timestamps(batches, position, header)
        if timestamps is None:
            return None
        for offset, timestamp in timestamps:
            if offset >= min_offset and timestamp >= timestamp_ms:
                return FoundRecord(offset, timestamp)
    return None if next_offset < 0 else SearchEnd(next_offset)


def first_record_with_timestamp(batch: bytes, timestamp_ms: int) -> FoundRecord | None:
    """The first record of the first batch in ``batch`` whose timestamp is exactly ``timestamp_ms``."""
    for position, header in iter_batches(batch):
        for offset, timestamp in _timestamps(batch, position, header) or []:
            if timestamp == timestamp_ms:
                return FoundRecord(offset, timestamp)
        return None
    return None


def _timestamps(batches: bytes, position: int, header: BatchHeader) -> list[tuple[int, int]] | None:
    """(offset, timestamp) of each record of the batch at ``position``; None when it cannot be decoded."""
    try:
        records = decode_records(memoryview(batches)[position : position + header.size], header)
    except ValueError:
        return None
    if records is None:
        return None
    if header.is_log_append_time:
        return [(record.offset, header.max_timestamp) for record in records]
    return [(record.offset, record.timestamp) for record in records]
