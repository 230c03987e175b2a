"""A partition log kept in PostgreSQL, with its visible batches mirrored in memory for reads.

Appends assign offsets on the loop (in call order, as every engine does), copy the batch into
the in-memory segment past its visible end and queue the row for the store's
:class:`~kcoord.storage.postgres.committer.PostgresCommitter`; the batch becomes readable once
its round has committed. Structural changes (retention, truncation, compaction swaps) run with
appends held back, each in its own transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import structlog

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import iter_batches
from kcoord.storage.api import AppendResult, LogConfig
from kcoord.storage.compaction import SegmentReader, Swap
from kcoord.storage.log import SegmentedLog
from kcoord.storage.memory import MemorySegmentData
from kcoord.storage.postgres.committer import PartitionFencedError, PostgresCommitter, RoundJob
from kcoord.storage.postgres.errors import storage_errors
from kcoord.storage.postgres.schema import Connection
from kcoord.storage.queued_ops import QueuedRoll as _Roll
from kcoord.storage.queued_ops import QueuedWrite as _Write
from kcoord.storage.segment import Placement, Segment, SegmentData, scan_segment
from kcoord.timer.api import Clock

__all__ = ["PostgresLog"]

logger = structlog.get_logger(__name__)


_Op = _Write | _Roll


class PostgresLog(SegmentedLog):
    """One topic-partition: rows in ``log_batches``/``log_segments``, bytes mirrored in memory."""

    def __init__(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        segments: list[Segment],
        pool: asyncpg.Pool,
        committer: PostgresCommitter,
        owner_epoch: int = 0,
        log_start_offset: int | None = None,
    ) -> None:
        super().__init__(topic, partition, config, clock, segments, log_start_offset)
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
        return Segment(base_offset, MemorySegmentData(), self._config.index_interval_bytes, now_ms)

    def _record_roll(self, old: Segment, new: Segment, seal_entry: tuple[int, int] | None) -> None:
        self._enqueue(_Roll(old, new, seal_entry))

    async def _write(self, segment: Segment, data: bytes, placement: Placement) -> None:
        buffer = _buffer_of(segment)
        if len(buffer) != placement.position:
            raise RuntimeError("postgres segment out of step with its placement")
        buffer += data
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._enqueue(_Write(segment, data, placement, done))
        await asyncio.shield(done)

    def _enqueue(self, op: _Op) -> None:
        self._queue.append(op)
        self._committer.request(self)

    def take_job(self) -> RoundJob | None:
        if not self._queue:
            return None
        ops, self._queue = self._queue, []
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
        if not self._jobs_in_flight and not self._queue:
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

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

    async def _idle(self) -> None:
        while self._queue or self._jobs_in_flight:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await asyncio.shield(waiter)

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
        buffer = _buffer_of(segment)
        rebuilt = scan_segment(
            segment.base_offset,
            segment.data,
            position,
            index_interval_bytes=self._config.index_interval_bytes,
            created_ms=segment.created_ms,
            verify_crc=False,
        )
        async with self._transaction("truncate") as connection:
            await connection.execute(
                "DELETE FROM log_batches WHERE topic = $1 AND partition_id = $2 AND base_offset >= $3",
                self._topic,
                self._partition,
                rebuilt.next_offset,
            )
        del buffer[position:]
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
            _buffer_of(segment).clear()

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
        return None

    # Compaction: the cleaned copies are built in memory and swapped in with one transaction.

    def _segment_reader(self, segment: Segment) -> SegmentReader:
        snapshot = bytes(_buffer_of(segment)[: segment.size])
        return lambda: snapshot

    def _stage_cleaned(self, old: Segment, data: bytes, rebuilt: Segment) -> SegmentData:
        return MemorySegmentData(data)

    def _discard_cleaned(self, swaps: list[Swap]) -> None:
        return None

    async def _install_cleaned(self, swaps: list[Swap]) -> None:
        async with self._transaction("compaction swap") as connection:
            for old, new in swaps:
                await self._delete_segment_rows(connection, old, keep_segment=new is not None)
                if new is None:
                    continue
                rows = [
                    (
                        self._topic,
                        self._partition,
                        header.base_offset,
                        header.last_offset,
                        header.max_timestamp,
                        header.size,
                        bytes(_buffer_of(new)[at : at + header.size]),
                    )
                    for at, header in iter_batches(bytes(_buffer_of(new)[: new.size]), verify_crc=False)
                ]
                await connection.executemany(
                    "INSERT INTO log_batches"
                    " (topic, partition_id, base_offset, last_offset, max_timestamp, size, data)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    rows,
                )

    async def _close_replaced(self, segments: list[Segment]) -> None:
        return None


def _buffer_of(segment: Segment) -> bytearray:
    data = segment.data
    if not isinstance(data, MemorySegmentData):
        raise TypeError("postgres log holds a foreign segment")
    return data.buffer
