"""Replaying an offsets partition from its log: the same records, through the same ``replay``, as live.

Batches are read in large chunks and decoded without kio (:mod:`kcoord.protocol.plain_batch`;
a compressed batch, which kcoord never writes but another broker might have, goes through kio).
The loop is yielded to every few thousand records and progress is logged every few seconds.

A batch that cannot be read in the middle of the log (torn, wrong CRC, records overrunning it) is
handled as segment recovery handles a torn tail: the log is truncated at the last good batch and
what was dropped is logged, so the partition goes ACTIVE with exactly the state its log holds,
never with a silent partial replay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kio.records.readers import read_batch

from kcoord.coordinator.offsets import CommittedOffset
from kcoord.coordinator.record_codec import RecordDecodeError, decode_offset_commit_fields, decode_record
from kcoord.coordinator.records import CoordinatorRecord
from kcoord.protocol.plain_batch import CorruptBatchError, iter_plain_records
from kcoord.protocol.record_batch import parse_header
from kcoord.storage.api import PartitionLog

__all__ = ["LoadStats", "replay_log"]

YIELD_EVERY = 2000
PROGRESS_EVERY_S = 2.0
READ_CHUNK = 1 << 20


class Replayer(Protocol):
    def replay(self, record: CoordinatorRecord) -> None: ...


@runtime_checkable
class OffsetReplayer(Protocol):
    """A shard that can take an offset commit's fields without its record objects (the load's hot path)."""

    def replay_offset(
        self, group: str, topic: str, partition: int, committed: CommittedOffset | None
    ) -> None: ...


@dataclass(slots=True)
class LoadStats:
    records: int = 0
    batches: int = 0
    skipped: int = 0
    truncated_at: int | None = None
    """Where a corrupt batch made the load cut the log, if it did."""
    seconds: float = 0.0


async def replay_log(partition_log: PartitionLog, shard: Replayer, stats: LoadStats, log: Any) -> None:
    """Replay every record of ``partition_log`` into ``shard`` (``log`` is a bound structlog logger)."""
    started = last_progress = time.perf_counter()
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    since_yield = 0
    fast_replay = shard.replay_offset if isinstance(shard, OffsetReplayer) else None
    while offset < end:
        chunk = await partition_log.read_async(offset, READ_CHUNK)
        if not chunk:
            break
        position = 0
        while position < len(chunk):
            try:
                header = parse_header(chunk, position)
                records = _records(chunk, position)
            except (CorruptBatchError, ValueError) as exc:
                await _truncate(partition_log, offset, end, stats, log, exc)
                end = offset
                break
            position += header.size
            stats.batches += 1
            for record_offset, key, value in records:
                fields = None if key is None else decode_offset_commit_fields(key, value)
                if fields is None or fast_replay is None:
                    _replay_one(shard, stats, key, value, log)
                else:
                    group, topic, partition, committed = fields
                    fast_replay(
                        group, topic, partition, None if committed is None else CommittedOffset(*committed)
                    )
                    stats.records += 1
                offset = record_offset + 1
            since_yield += header.record_count
            offset = max(offset, header.next_offset)
        if since_yield >= YIELD_EVERY:
            since_yield = 0
            await asyncio.sleep(0)
            now = time.perf_counter()
            if now - last_progress >= PROGRESS_EVERY_S:
                last_progress = now
                log.debug("offsets_partition.loading", offset=offset, end_offset=end, records=stats.records)
    stats.seconds = time.perf_counter() - started
    emit = log.info if stats.batches else log.debug
    emit(
        "offsets_partition.loaded",
        records=stats.records,
        batches=stats.batches,
        skipped=stats.skipped,
        duration_ms=round(stats.seconds * 1000, 1),
    )


def _records(chunk: bytes, position: int) -> Iterable[tuple[int, bytes | None, bytes | None]]:
    try:
        return list(iter_plain_records(chunk, position))
    except NotImplementedError:
        batch, _ = read_batch(chunk, position)
        return [(int(r.offset), r.key, r.value) for r in batch.records]


async def _truncate(
    partition_log: PartitionLog, offset: int, end: int, stats: LoadStats, log: Any, error: Exception
) -> None:
    log.error(
        "offsets_log.corrupt_batch_truncated",
        offset=offset,
        dropped_offsets=end - offset,
        records_replayed=stats.records,
        error=str(error),
    )
    stats.truncated_at = offset
    await partition_log.truncate_to(offset)


def _replay_one(shard: Replayer, stats: LoadStats, key: bytes | None, value: bytes | None, log: Any) -> None:
    if key is None:
        stats.skipped += 1
        return
    try:
        record = decode_record(key, value)
    except RecordDecodeError as exc:
        stats.skipped += 1
        log.warning("offsets_log.bad_record", error=str(exc))
        return
    if record is None:
        stats.skipped += 1
        log.debug("offsets_record_type_skipped", record_type=int.from_bytes(key[:2], "big", signed=True))
        return
    stats.records += 1
    shard.replay(record)
