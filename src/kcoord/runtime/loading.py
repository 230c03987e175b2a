"""Replaying a coordinator partition from its log: the same records, through the same ``replay``, as live.

The coordinator's :class:`~kcoord.runtime.coordinator_type.RecordSerde` reads the records (and may
offer a shortcut for the commonest ones, as the group coordinator does for offset commits); each
goes to ``shard.replay`` with its offset and its batch's producer id and epoch, and a control
batch's markers go to ``shard.replay_end_transaction_marker``.

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
from typing import Any

from kio.records.readers import read_batch

from kcoord.protocol.control_batch import read_control_record
from kcoord.protocol.plain_batch import CorruptBatchError, iter_plain_records
from kcoord.protocol.record_batch import parse_header
from kcoord.runtime.coordinator_type import CoordinatorShard, RecordSerde
from kcoord.storage.api import PartitionLog

__all__ = ["LoadStats", "replay_log"]

YIELD_EVERY = 2000
PROGRESS_EVERY_S = 2.0
READ_CHUNK = 1 << 20


@dataclass(slots=True)
class LoadStats:
    records: int = 0
    batches: int = 0
    skipped: int = 0
    truncated_at: int | None = None
    """Where a corrupt batch made the load cut the log, if it did."""
    seconds: float = 0.0


async def replay_log(
    partition_log: PartitionLog, shard: CoordinatorShard, serde: RecordSerde, stats: LoadStats, log: Any
) -> None:
    """Replay every record of ``partition_log`` into ``shard`` (``log`` is a bound structlog logger)."""
    started = last_progress = time.perf_counter()
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    since_yield = 0
    fast_replay = serde.fast_replay(shard)  # plain records only: a producer's batch goes through replay
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
            if header.is_control:
                _replay_markers(shard, header.producer_id, header.producer_epoch, records)
                records = []
            shortcut = fast_replay if header.producer_id < 0 else None
            for record_offset, key, value in records:
                if key is None:
                    stats.skipped += 1
                elif shortcut is not None and shortcut(key, value):
                    stats.records += 1
                else:
                    _replay_one(shard, serde, stats, key, value, record_offset, header, log)
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


def _replay_markers(
    shard: CoordinatorShard, producer_id: int, producer_epoch: int, records: Iterable[tuple[int, Any, Any]]
) -> None:
    """A control batch: each marker it holds ends the producer's transaction (unknown types are skipped)."""
    for _, key, value in records:
        marker = read_control_record(key, value)
        if marker is not None:
            shard.replay_end_transaction_marker(producer_id, producer_epoch, marker.committed)


def _replay_one(
    shard: CoordinatorShard,
    serde: RecordSerde,
    stats: LoadStats,
    key: bytes,
    value: bytes | None,
    offset: int,
    header: Any,
    log: Any,
) -> None:
    try:
        record = serde.decode(key, value)
    except ValueError as exc:
        stats.skipped += 1
        log.warning("offsets_log.bad_record", error=str(exc))
        return
    if record is None:
        stats.skipped += 1
        log.debug("offsets_record_type_skipped", record_type=int.from_bytes(key[:2], "big", signed=True))
        return
    stats.records += 1
    shard.replay(record, offset, header.producer_id, header.producer_epoch)
