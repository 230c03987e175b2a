"""A partition log kept in PostgreSQL: its batch index in memory, its bytes in the database and a cache.

Appends assign offsets on the loop (in call order, as every engine does), put the batch in the
store's :class:`~kcoord.storage.postgres.batch_cache.BatchCache` and queue the row for the store's
:class:`~kcoord.storage.postgres.committer.PostgresCommitter`; the batch becomes readable (its
index entry visible) once its round has committed. Reads take what the cache holds and fetch the
rest from ``log_batches`` (:meth:`PostgresLog.read_async`). Structural changes (retention,
truncation, compaction swaps) run with appends held back, each in its own transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import structlog

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import BatchHeader, iter_batches
from kcoord.storage.api import AppendResult, LogConfig
from kcoord.storage.compaction import SegmentReader, Swap
from kcoord.storage.log import SegmentedLog
from kcoord.storage.postgres.batch_cache import BatchCache
from kcoord.storage.postgres.committer import PartitionFencedError, PostgresCommitter, RoundJob
from kcoord.storage.postgres.errors import storage_errors
from kcoord.storage.postgres.schema import Connection
from kcoord.storage.postgres.segment import BatchSpan, PostgresSegment, segment_from_rows
from kcoord.storage.queued_ops import QueuedRoll as _Roll
from kcoord.storage.queued_ops import QueuedWrite as _Write
from kcoord.storage.queued_ops import QueuedWriter
from kcoord.storage.segment import Placement, Segment, SegmentData
from kcoord.timer.api import Clock

__all__ = ["PostgresLog"]

logger = structlog.get_logger(__name__)


_Op = _Write | _Roll

READ_ATTEMPTS = 3
"""A read whose batches changed under it (truncation, a compaction swap) starts over this often."""


class PostgresLog(QueuedWriter[_Op], SegmentedLog):
    """One topic-partition: rows in ``log_batches``/``log_segments``, its index in memory."""

    def __init__(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        segments: list[Segment],
        pool: asyncpg.Pool,
        committer: PostgresCommitter,
        cache: BatchCache,
        owner_epoch: int = 0,
        log_start_offset: int | None = None,
    ) -> None:
        super().__init__(topic, partition, config, clock, segments, log_start_offset)
        self._cache = cache
        self.owner_epoch = owner_epoch
        """The epoch this log writes under; a round that finds another in the database fences it."""
        self.fenced: PartitionFencedError | None = None
        """Set once a round was refused: the log is closed to appends and structural changes for good."""
        self._pool = pool
        self._committer = committer
        self._queue: list[_Op] = []
        self._jobs_in_flight: list[list[_Op]] = []
        self._idle_waiters: list[asyncio.Future[None]] = []

    @property
    def leader_epoch(self) -> int:
        """The owner epoch: each claim of the partition starts a new leader epoch."""
        return self.owner_epoch

    # Appending: queued for the committer, visible when the round commits.

    async def append(self, batch: bytes) -> AppendResult:
        if self.fenced is not None:
            raise self.fenced
        return await super().append(batch)

    def _new_segment(self, base_offset: int, now_ms: int) -> Segment:
        return PostgresSegment(base_offset, self._config.index_interval_bytes, now_ms)

    def _record_roll(self, old: Segment, new: Segment, seal_entry: tuple[int, int] | None) -> None:
        self._enqueue(_Roll(old, new, seal_entry))

    async def _write(self, segment: Segment, data: bytes, placement: Placement) -> None:
        self._cache.put(_indexed(segment).token, placement.position, data)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._enqueue(_Write(segment, data, placement, done))
        await asyncio.shield(done)

    def take_job(self) -> RoundJob | None:
        ops = self._take_queued()
        if ops is None:
            return None
        self._jobs_in_flight.append(ops)
        job = RoundJob(self._topic, self._partition, self.owner_epoch)
        for op in ops:
            if isinstance(op, _Roll):
                job.segments.append((self._topic, self._partition, op.new.base_offset, op.new.created_ms))
            else:
                placement = op.placement
                job.batches.append(
                    (
                        self._topic,
                        self._partition,
                        placement.base_offset,
                        placement.next_offset - 1,
                        placement.max_timestamp,
                        placement.size,
                        op.data,
                    )
                )
        return job

    def finish_job(self, job: RoundJob, failure: BaseException | None) -> None:
        ops = self._jobs_in_flight.pop(0)
        if failure is not None:
            self._fail(ops + self._queue, failure)
            self._queue = []
        else:
            self._complete(ops)
        self._wake_if_idle()

    def _complete(self, ops: list[_Op]) -> None:
        for op in ops:
            if isinstance(op, _Write):
                self._made_visible(op.segment, op.placement)
                if not op.done.done():
                    op.done.set_result(None)
            elif op.seal_entry is not None:
                op.old.add_time_entry(op.seal_entry)
        self._notify()

    def _fail(self, ops: list[_Op], exc: BaseException) -> None:
        if isinstance(exc, PartitionFencedError):
            self._fence(ops, exc)
            return
        self._failure = exc
        logger.error("log.write_failed", topic=self._topic, partition=self._partition, error=repr(exc))
        for op in ops:
            if isinstance(op, _Write) and not op.done.done():
                op.done.set_exception(KafkaError(ErrorCode.kafka_storage_error, f"log write failed: {exc!r}"))

    def _fence(self, ops: list[_Op], fenced: PartitionFencedError) -> None:
        """Another node owns the partition now: fail what is queued and never touch its rows again.

        The log is marked closed (no recovery, whose truncation would delete the new owner's rows;
        no retention or compaction); its in-memory copy is stale from here on.
        """
        self.fenced = fenced
        self._closed = True
        logger.warning("log.fenced", topic=self._topic, partition=self._partition, owner_epoch=fenced.epoch)
        for op in ops:
            if isinstance(op, _Write) and not op.done.done():
                op.done.set_exception(fenced)

    async def flush(self) -> None:
        """Every committed round is durable already (PostgreSQL's commit is the flush)."""
        await self._idle()

    # Structural changes (appends held back, the committer idle for this log).

    async def _create_segment(self, base_offset: int, now_ms: int) -> Segment:
        async with self._transaction("segment create") as connection:
            await connection.execute(
                "INSERT INTO log_segments (topic, partition_id, base_offset, created_ms)"
                " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                self._topic,
                self._partition,
                base_offset,
                now_ms,
            )
        return self._new_segment(base_offset, now_ms)

    async def _truncate_segment(self, segment: Segment, position: int) -> Segment:
        rebuilt = _indexed(segment).truncated(position)
        async with self._transaction("truncate") as connection:
            await connection.execute(
                "DELETE FROM log_batches WHERE topic = $1 AND partition_id = $2 AND base_offset >= $3",
                self._topic,
                self._partition,
                rebuilt.next_offset,
            )
        self._cache.drop_segment(rebuilt.token, position)
        return rebuilt

    async def _persist_log_start(self, offset: int) -> None:
        async with self._transaction("log start update") as connection:
            await connection.execute(
                "UPDATE log_partitions SET log_start_offset = $3 WHERE topic = $1 AND partition_id = $2",
                self._topic,
                self._partition,
                offset,
            )

    async def _delete_segments(self, segments: list[Segment]) -> None:
        if not segments:
            return
        async with self._transaction("segment delete") as connection:
            for segment in segments:
                await self._delete_segment_rows(connection, segment, keep_segment=False)
        for segment in segments:
            self._cache.drop_segment(_indexed(segment).token)

    async def _delete_segment_rows(
        self, connection: Connection, segment: Segment, *, keep_segment: bool
    ) -> None:
        await connection.execute(
            "DELETE FROM log_batches WHERE topic = $1 AND partition_id = $2"
            " AND base_offset >= $3 AND base_offset < $4",
            self._topic,
            self._partition,
            segment.base_offset,
            max(segment.next_offset, segment.base_offset + 1),
        )
        if not keep_segment:
            await connection.execute(
                "DELETE FROM log_segments WHERE topic = $1 AND partition_id = $2 AND base_offset = $3",
                self._topic,
                self._partition,
                segment.base_offset,
            )

    @asynccontextmanager
    async def _transaction(self, action: str) -> AsyncIterator[Connection]:
        """One pooled connection in one transaction, under this log's owner epoch.

        Structural changes (truncation after a failed round, retention, compaction swaps) delete
        rows, so they are fenced like appends: the partition's row is locked ``FOR SHARE`` and a
        moved-on epoch raises :class:`PartitionFencedError` before anything is touched. Database
        failures raise KAFKA_STORAGE_ERROR.
        """
        if self.fenced is not None:
            raise self.fenced
        with storage_errors(action):
            async with self._pool.acquire() as connection, connection.transaction():
                epoch = await connection.fetchval(
                    "SELECT owner_epoch FROM log_partitions WHERE topic = $1 AND partition_id = $2 FOR SHARE",
                    self._topic,
                    self._partition,
                )
                if epoch != self.owner_epoch:
                    fenced = PartitionFencedError(self._topic, self._partition, self.owner_epoch)
                    self._fence([], fenced)
                    raise fenced
                yield connection

    async def _close_files(self) -> None:
        for segment in self._segments:
            self._cache.drop_segment(_indexed(segment).token)

    # Reading: the index finds the batches, the cache or the database has their bytes.

    def read(self, offset: int, max_bytes: int) -> bytes:
        """The cached batches from ``offset`` on (see :meth:`kcoord.storage.api.PartitionLog.read`)."""
        located = self._locate(offset, max_bytes)
        if located is None:
            return b""
        segment, spans = located
        chunks: list[bytes] = []
        for _, position, _ in spans:
            data = self._cache.get(segment.token, position)
            if data is None:
                break
            chunks.append(data)
        if not chunks:
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"{self._topic}-{self._partition} offset {offset} is not cached: read it with read_async",
            )
        return b"".join(chunks)

    async def read_async(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from ``offset``: cached ones from memory, the others from ``log_batches``."""
        for _ in range(READ_ATTEMPTS):
            located = self._locate(offset, max_bytes)
            if located is None:
                return b""
            data = await self._read_spans(*located)
            if data is not None:
                return data
        raise KafkaError(
            ErrorCode.kafka_storage_error, f"{self._topic}-{self._partition} changed under a read at {offset}"
        )

    async def _read_spans(self, segment: PostgresSegment, spans: list[BatchSpan]) -> bytes | None:
        """The bytes of ``spans``, from the cache or the database; None when the log changed meanwhile
        (the segment was truncated, replaced or deleted while the database answered)."""
        chunks: list[bytes | None] = [self._cache.get(segment.token, position) for _, position, _ in spans]
        missing = [span for span, chunk in zip(spans, chunks, strict=True) if chunk is None]
        if missing:
            fetched = await self._fetch_batches(segment, missing)
            if fetched is None or self._closed or not any(held is segment for held in self._segments):
                return None
            for index, chunk in enumerate(chunks):
                if chunk is None:
                    chunks[index] = fetched[spans[index][1]]
        return b"".join(chunk for chunk in chunks if chunk is not None)

    def _locate(self, offset: int, max_bytes: int) -> tuple[PostgresSegment, list[BatchSpan]] | None:
        """The segment and batches a read from ``offset`` returns; None at the log end."""
        found = self._batch_at(offset)
        if found is None:
            return None
        segment = _indexed(found[0])
        return segment, segment.spans(found[1], max_bytes)

    async def _fetch_batches(
        self, segment: PostgresSegment, spans: list[BatchSpan]
    ) -> dict[int, bytes] | None:
        """The bytes of ``spans`` by position, read from the database and kept at the cache's cold end;
        None when a row is missing or not the size the index says (the log changed meanwhile)."""
        first, last = spans[0][0], spans[-1][0]
        with storage_errors("read"):
            rows = await self._pool.fetch(
                "SELECT base_offset, data FROM log_batches WHERE topic = $1 AND partition_id = $2"
                " AND base_offset BETWEEN $3 AND $4 ORDER BY base_offset",
                self._topic,
                self._partition,
                segment.batch_base_offsets[first],
                segment.batch_base_offsets[last],
            )
        by_base = {row["base_offset"]: row["data"] for row in rows}
        fetched: dict[int, bytes] = {}
        for index, position, size in spans:
            data = by_base.get(segment.batch_base_offsets[index])
            if data is None or len(data) != size:
                return None
            fetched[position] = data
            self._cache.put(segment.token, position, data, hot=False)
        return fetched

    # Compaction: the segments are read whole, cleaned in a thread and swapped in with one transaction.

    async def _segment_reader(self, segment: Segment) -> SegmentReader:
        indexed = _indexed(segment)
        snapshot = await self._read_spans(indexed, indexed.spans(0, indexed.size)) if indexed.size else b""
        if snapshot is None or len(snapshot) != indexed.size:
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"{self._topic}-{self._partition} segment {indexed.base_offset} changed while being read",
            )
        return lambda: snapshot

    def _stage_cleaned(self, old: Segment, data: bytes, rebuilt: Segment) -> SegmentData:
        return _StagedCopy(data, rebuilt, self._config.index_interval_bytes)

    def _discard_cleaned(self, swaps: list[Swap]) -> None:
        return None

    async def _install_cleaned(self, swaps: list[Swap]) -> None:
        async with self._transaction("compaction swap") as connection:
            for old, new in swaps:
                await self._delete_segment_rows(connection, old, keep_segment=new is not None)
                if new is None:
                    continue
                staged = _staged(new)
                rows = [
                    (
                        self._topic,
                        self._partition,
                        header.base_offset,
                        header.last_offset,
                        header.max_timestamp,
                        header.size,
                        staged.data[at : at + header.size],
                    )
                    for at, header in staged.batches
                ]
                await connection.executemany(
                    "INSERT INTO log_batches"
                    " (topic, partition_id, base_offset, last_offset, max_timestamp, size, data)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    rows,
                )

    def _installed(self, segment: Segment) -> Segment:
        return _staged(segment).release()

    async def _close_replaced(self, segments: list[Segment]) -> None:
        for segment in segments:
            self._cache.drop_segment(_indexed(segment).token)


class _StagedCopy:
    """A cleaned segment between the cleaner's thread and its swap: its bytes, to be written as rows,
    and its per-batch index, which is what the log keeps once it is stored. The batch headers are
    parsed once, here in the cleaner's thread: the swap (on the loop, appends held back) reuses them."""

    def __init__(self, data: bytes, rebuilt: Segment, index_interval_bytes: int) -> None:
        self.data = data
        self.batches: list[tuple[int, BatchHeader]] = list(iter_batches(data, verify_crc=False))
        """(position, header) of each batch of ``data``."""
        self.segment = segment_from_rows(
            rebuilt.base_offset,
            rebuilt.created_ms,
            (
                (header.base_offset, header.last_offset, header.max_timestamp, header.size)
                for _, header in self.batches
            ),
            index_interval_bytes=index_interval_bytes,
        )
        seal_entry = self.segment.seal()
        if seal_entry is not None:
            self.segment.add_time_entry(seal_entry)
        self.segment.next_offset = rebuilt.next_offset

    def read_at(self, position: int, size: int) -> bytes:
        return self.data[position : position + size]

    def release(self) -> PostgresSegment:
        """The indexed segment, its bytes let go (they are rows now)."""
        self.data = b""
        self.batches = []
        return self.segment


def _staged(segment: Segment) -> _StagedCopy:
    data = segment.data
    if not isinstance(data, _StagedCopy):
        raise TypeError("postgres compaction swapped in a segment it did not stage")
    return data


def _indexed(segment: Segment) -> PostgresSegment:
    if not isinstance(segment, PostgresSegment):
        raise TypeError("postgres log holds a foreign segment")
    return segment
