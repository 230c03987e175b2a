"""The engine-neutral part of a partition log: offsets, rolling, reads, retention, truncation,
compaction.

Engines subclass :class:`SegmentedLog` and supply the I/O: how planned batches are written
(:meth:`~SegmentedLog._write`), how a roll is recorded, and the structural changes (segment
deletion, truncation, creation, swapping in compacted copies) that run while appends are held
back by the log's gate.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict

import structlog

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.plain_batch import EncodedBatch
from kcoord.protocol.record_batch import parse_header, prepare_for_append
from kcoord.storage.api import (
    AppendListener,
    AppendResult,
    CompactionResult,
    FirstUnstableOffset,
    LogConfig,
    StorageTimings,
)
from kcoord.storage.compaction import (
    CleanedLog,
    CompactionPlan,
    SegmentReader,
    Swap,
    clean_segments,
    plan_compaction,
)
from kcoord.storage.segment import MAX_RELATIVE_OFFSET, Placement, Segment, SegmentData
from kcoord.timer.api import Clock

__all__ = ["SegmentedLog"]

logger = structlog.get_logger(__name__)


class SegmentedLog(ABC):
    """A partition log made of segments; subclasses do the I/O."""

    _times_own_appends = False
    """True for engines that report :attr:`timings` of :meth:`append_soon` themselves when a write
    completes (no done-callback, and so no loop callback, per append)."""

    def __init__(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        segments: list[Segment],
        log_start_offset: int | None = None,
    ) -> None:
        if not segments:
            raise ValueError("a log needs at least one segment")
        self._topic = topic
        self._partition = partition
        self._config = config
        self._clock = clock
        self._segments = segments
        self.timings: StorageTimings | None = None
        """Set by the store; told of every append's latency (and, by engines that fsync, flushes)."""
        self.first_unstable: FirstUnstableOffset | None = None
        """Set by the store; compaction never reaches the partition's first unstable offset."""
        self._next_offset = segments[-1].next_offset
        self._log_start_offset = min(max(segments[0].base_offset, log_start_offset or 0), self._next_offset)
        self._end_offset = self._next_offset
        self._gate: asyncio.Future[None] | None = None
        self._listeners: list[AppendListener] = []
        self._closed = False
        self._failure: BaseException | None = None
        self._compacting = False
        self._swapping: asyncio.Future[None] | None = None
        """A compaction's swap under way; it finishes even when the pass is cancelled, and close waits."""
        self._first_dirty_segment: Segment | None = None
        """The first segment the last compaction did not cover; None: all of the log is dirty."""
        self._next_delete_horizon_ms: int | None = None

    # Read-only state.

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._end_offset

    @property
    def leader_epoch(self) -> int:
        """The leader epoch every append is stamped with: 0 for a log only this node ever writes."""
        return 0

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def update_config(self, config: LogConfig) -> None:
        self._config = config

    def add_append_listener(self, listener: AppendListener) -> Callable[[], None]:
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    # Appending.

    async def append(self, batch: bytes) -> AppendResult:
        while True:
            while self._gate is not None:
                await asyncio.shield(self._gate)
            if self._failure is None or self._closed:
                break
            await self._recover()
        self._ensure_usable()
        segment, data, placement, log_append_time = self._plan_append(batch)
        started = time.perf_counter()
        await self._write(segment, data, placement)
        if self.timings is not None and not self._times_own_appends:
            self.timings.on_append(self._topic, self._partition, len(data), time.perf_counter() - started)
        return AppendResult(
            base_offset=placement.base_offset,
            last_offset=placement.next_offset - 1,
            log_append_time_ms=-1 if log_append_time is None else log_append_time,
            log_start_offset=self._log_start_offset,
        )

    def append_soon(
        self,
        batch: bytes | EncodedBatch,
        on_written: Callable[[asyncio.Future[None]], None] | None = None,
    ) -> asyncio.Future[None] | None:
        """See :meth:`kcoord.storage.api.PartitionLog.append_soon` (the hot path: no task, no shield)."""
        if self._gate is not None or self._failure is not None or self._closed:
            return None
        try:
            segment, data, placement, _ = self._plan_append(batch)
        except Exception as exc:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            if on_written is not None:
                failed.add_done_callback(on_written)
            return failed
        written = self._write_soon(segment, data, placement, on_written)
        timings = self.timings
        if timings is not None and not self._times_own_appends:
            started, size = time.perf_counter(), len(data)

            def timed(_: asyncio.Future[None]) -> None:
                timings.on_append(self._topic, self._partition, size, time.perf_counter() - started)

            written.add_done_callback(timed)
        return written

    def _plan_append(self, batch: bytes | EncodedBatch) -> tuple[Segment, bytes, Placement, int | None]:
        """Assign the batch its offsets and place it (on the loop, in call order); nothing is written yet.

        An :class:`EncodedBatch` brings its size, last offset delta and timestamp; bytes are parsed.
        """
        if isinstance(batch, EncodedBatch):
            raw, size = batch.data, len(batch.data)
            last_offset_delta, max_timestamp = batch.last_offset_delta, batch.max_timestamp
        else:
            header = parse_header(batch)
            if header.size != len(batch):
                raise ValueError(f"expected one batch of {header.size} bytes, got {len(batch)}")
            raw, size = batch, header.size
            last_offset_delta, max_timestamp = header.last_offset_delta, header.max_timestamp
        now = self._clock.now_ms()
        segment = self._segment_for_append(size, last_offset_delta, now)
        base_offset = self._next_offset
        log_append_time = now if self._config.message_timestamp_type == "LogAppendTime" else None
        data = prepare_for_append(
            raw, base_offset=base_offset, log_append_time_ms=log_append_time, leader_epoch=self.leader_epoch
        )
        max_timestamp = max_timestamp if log_append_time is None else log_append_time
        placement = segment.plan(base_offset, base_offset + last_offset_delta + 1, max_timestamp, len(data))
        self._next_offset = placement.next_offset
        return segment, data, placement, log_append_time

    def _write_soon(
        self,
        segment: Segment,
        data: bytes,
        placement: Placement,
        on_written: Callable[[asyncio.Future[None]], None] | None = None,
    ) -> asyncio.Future[None]:
        """Start writing a planned batch; ``on_written(future)`` once it completes. Engines with a queue
        override this to skip the task and call ``on_written`` themselves (no loop callback)."""
        written = asyncio.ensure_future(self._write(segment, data, placement))
        if on_written is not None:
            written.add_done_callback(on_written)
        return written

    def _segment_for_append(self, size: int, last_offset_delta: int, now_ms: int) -> Segment:
        active = self._segments[-1]
        if active.assigned_size > 0 and (
            active.assigned_size + size > self._config.segment_bytes
            or now_ms - active.created_ms >= self._config.segment_ms
            or self._next_offset + last_offset_delta - active.base_offset > MAX_RELATIVE_OFFSET
        ):
            return self._roll(now_ms)
        return active

    def _roll(self, now_ms: int) -> Segment:
        """Start a new active segment at the next offset (its files are created by the writer)."""
        old = self._segments[-1]
        new = self._new_segment(self._next_offset, now_ms)
        self._segments.append(new)
        self._record_roll(old, new, old.seal())
        return new

    def _made_visible(self, segment: Segment, placement: Placement) -> None:
        segment.apply(placement)
        self._end_offset = placement.next_offset

    def _notify(self) -> None:
        for listener in list(self._listeners):
            try:
                listener(self._end_offset)
            except Exception:
                logger.exception("log.append_listener_failed", topic=self._topic, partition=self._partition)

    async def _recover(self) -> None:
        """After a failed write: cut the log back to what is durable and visible, then accept appends again.

        A write that fails leaves the log where its last completed append left it: whatever the
        failed round planned (offsets, positions, rolled segments) is forgotten and any bytes it
        wrote are truncated away. When the storage still fails, the append that asked gets
        KAFKA_STORAGE_ERROR and the next one tries again: one fault never blocks a log for good.
        """
        async with self._exclusive():
            if self._failure is None or self._closed:
                return
            try:
                await self._repair()
            except Exception as exc:
                self._failure = exc
                logger.error(
                    "log.recovery_failed", topic=self._topic, partition=self._partition, error=repr(exc)
                )
                raise KafkaError(ErrorCode.kafka_storage_error, f"log recovery failed: {exc!r}") from exc
            self._failure = None
            logger.info(
                "log.recovered", topic=self._topic, partition=self._partition, end_offset=self._end_offset
            )

    async def _repair(self) -> None:
        self._next_offset = self._end_offset
        doomed: list[Segment] = []
        while (
            len(self._segments) > 1
            and self._segments[-1].size == 0
            and self._segments[-1].base_offset >= self._end_offset
        ):
            doomed.append(self._segments.pop())
        if doomed:
            await self._delete_segments(doomed)
        active = self._segments[-1]
        self._segments[-1] = await self._truncate_segment(active, active.size)

    def _ensure_usable(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log {self._topic}-{self._partition} is closed")
        if self._failure is not None:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log failed: {self._failure!r}")

    # Reading.

    def read(self, offset: int, max_bytes: int) -> bytes:
        found = self._batch_at(offset)
        return b"" if found is None else found[0].read_batches(found[1], max_bytes)

    def _batch_at(self, offset: int) -> tuple[Segment, int] | None:
        """(segment, position) of the batch a read from ``offset`` starts with; None at the log end."""
        if self._closed:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log {self._topic}-{self._partition} is closed")
        if offset < self._log_start_offset or offset > self._end_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {offset} outside [{self._log_start_offset}, {self._end_offset}]",
            )
        if offset == self._end_offset:
            return None
        for segment in self._segments[self._index_holding(offset) :]:
            position = segment.position_of(offset)
            if position < segment.size:
                return segment, position
        return None

    async def read_async(self, offset: int, max_bytes: int) -> bytes:
        """:meth:`read`, as the contract's awaitable read (engines with cold data override it)."""
        return self.read(offset, max_bytes)

    def _index_holding(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (a compacted one may not hold the batch)."""
        return max(bisect_right(self._segments, offset, key=lambda segment: segment.base_offset) - 1, 0)

    def _segment_holding(self, offset: int) -> Segment:
        return self._segments[self._index_holding(offset)]

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        for segment in self._segments:
            found = segment.find_timestamp(timestamp_ms)
            if found is not None:
                return found
        return None

    def max_timestamp(self) -> tuple[int, int]:
        best = (-1, -1)
        for segment in self._segments:
            if segment.max_timestamp > best[1]:
                best = (segment.offset_of_max_timestamp, segment.max_timestamp)
        return best

    # Structural changes, run with appends held back.

    @asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        """Hold back new appends and wait for pending writes; appends resume in arrival order."""
        while self._gate is not None:
            await asyncio.shield(self._gate)
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._gate = gate
        try:
            await self._idle()
            yield
        finally:
            self._gate = None
            gate.set_result(None)

    async def truncate_to(self, offset: int) -> None:
        async with self._exclusive():
            self._ensure_usable()
            if offset >= self._next_offset:
                return
            if offset <= self._log_start_offset:
                await self._persist_log_start(offset)
                doomed, self._segments = self._segments, []
                self._log_start_offset = self._next_offset = self._end_offset = offset
                await self._delete_segments(doomed)
                self._segments = [await self._create_segment(offset, self._clock.now_ms())]
            else:
                holder = self._segment_holding(offset)
                index = self._segments.index(holder)
                cut = holder.position_of(offset)
                next_base = holder.base_offset_at(cut)
                # Past a compaction gap the next batch may start after ``offset``.
                self._next_offset = self._end_offset = offset if next_base is None else min(next_base, offset)
                holder.size = cut
                doomed = self._segments[index + 1 :]
                del self._segments[index + 1 :]
                await self._delete_segments(doomed)
                self._segments[index] = await self._truncate_segment(holder, cut)
            logger.info(
                "log.truncated", topic=self._topic, partition=self._partition, end_offset=self._end_offset
            )

    async def delete_records_before(self, offset: int) -> int:
        async with self._exclusive():
            self._ensure_usable()
            if offset > self._end_offset:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"offset {offset} is past the log end {self._end_offset}",
                )
            if offset <= self._log_start_offset:
                return self._log_start_offset
            await self._persist_log_start(offset)
            self._log_start_offset = offset
            # As Kafka: a segment goes once the next one starts at or below the log start.
            count = 0
            while count + 1 < len(self._segments) and self._segments[count + 1].base_offset <= offset:
                count += 1
            doomed = self._segments[:count]
            del self._segments[:count]
            await self._delete_segments(doomed)
            logger.info(
                "log.records_deleted",
                topic=self._topic,
                partition=self._partition,
                log_start_offset=offset,
                segments=count,
            )
            return offset

    async def enforce_retention(self, now_ms: int) -> int:
        if self._closed or self._failure is not None or not self._retention_victims(now_ms):
            return 0
        async with self._exclusive():
            count = self._retention_victims(now_ms)
            if count == 0:
                return 0
            if count == len(self._segments):
                self._roll(now_ms)
                await self._idle()
            doomed = self._segments[:count]
            del self._segments[:count]
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            await self._delete_segments(doomed)
            logger.info(
                "log.retention_deleted_segments",
                topic=self._topic,
                partition=self._partition,
                segments=count,
                log_start_offset=self._log_start_offset,
            )
            return count

    def _retention_victims(self, now_ms: int) -> int:
        """How many leading segments retention deletes; all of them only when the active one expired."""
        config = self._config
        if not config.deletes:
            return 0
        by_time = 0
        if config.retention_ms >= 0:
            for segment in self._segments:
                if segment.size == 0 or now_ms - segment.max_timestamp <= config.retention_ms:
                    break
                by_time += 1
        by_size = 0
        if config.retention_bytes >= 0:
            excess = self.size_bytes - config.retention_bytes
            for segment in self._segments[:-1]:
                if excess - segment.size < 0:
                    break
                excess -= segment.size
                by_size += 1
        return max(by_time, by_size)

    # Compaction (see kcoord.storage.compaction).

    def compaction_due(self, now_ms: int) -> bool:
        """Whether the background cleaner should compact now: dirty enough, or a tombstone's time is up."""
        if not self._config.compacts or self._closed or self._failure is not None or self._compacting:
            return False
        plan = self._compaction_plan(now_ms)
        if plan is None:
            return False
        horizon = self._next_delete_horizon_ms
        dirty = plan.first_dirty < len(plan.segments)
        return (dirty and plan.dirty_ratio > self._config.min_cleanable_dirty_ratio) or (
            horizon is not None and now_ms >= horizon
        )

    def _compaction_plan(self, now_ms: int) -> CompactionPlan | None:
        unstable = None if self.first_unstable is None else self.first_unstable(self._topic, self._partition)
        return plan_compaction(
            self._segments,
            self._first_dirty_segment,
            now_ms,
            self._config.min_compaction_lag_ms,
            first_unstable_offset=unstable,
        )

    async def compact(self, now_ms: int) -> CompactionResult | None:
        self._ensure_usable()
        plan = None if self._compacting else self._compaction_plan(now_ms)
        if plan is None:
            return None
        self._compacting = True
        try:
            return await self._compact(plan, now_ms)
        finally:
            self._compacting = False

    async def _compact(self, plan: CompactionPlan, now_ms: int) -> CompactionResult | None:
        """Map and rewrite in a thread while appends go on; swap with appends held back."""
        started = time.perf_counter()
        config = self._config
        readers = [await self._segment_reader(segment) for segment in plan.segments]
        cleaned = await asyncio.to_thread(
            clean_segments,
            plan,
            readers,
            now_ms=now_ms,
            delete_retention_ms=config.delete_retention_ms,
            index_interval_bytes=config.index_interval_bytes,
            stage=self._stage_cleaned,
            discard=self._discard_cleaned,
        )
        async with self._exclusive():
            count = len(plan.segments)
            in_place = (
                len(self._segments) > count
                and self._segments[:count] == plan.segments
                and self._segments[count] is plan.end
            )
            if self._closed or self._failure is not None or not in_place:
                await asyncio.to_thread(self._discard_cleaned, cleaned.swaps)
                return None
            swap = self._swapping = asyncio.ensure_future(self._swap_in(cleaned, plan))
            swap.add_done_callback(self._swap_finished)
            await asyncio.shield(swap)
        result = CompactionResult(
            segments=len(plan.segments),
            records_before=cleaned.records_before,
            records_after=cleaned.records_after,
            bytes_before=cleaned.bytes_before,
            bytes_after=cleaned.bytes_after,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        logger.info("log.compacted", topic=self._topic, partition=self._partition, **asdict(result))
        return result

    def _swap_finished(self, swap: asyncio.Future[None]) -> None:
        if self._swapping is swap:
            self._swapping = None
        if not swap.cancelled() and swap.exception() is not None:
            logger.error("log.compaction_swap_failed", topic=self._topic, partition=self._partition)

    async def _swap_in(self, cleaned: CleanedLog, plan: CompactionPlan) -> None:
        await self._install_cleaned(cleaned.swaps)
        survivors = [self._installed(new) for _, new in cleaned.swaps if new is not None]
        self._segments[: len(plan.segments)] = survivors
        self._first_dirty_segment = plan.end
        self._next_delete_horizon_ms = cleaned.next_delete_horizon_ms
        await self._close_replaced(plan.segments)

    async def close(self) -> None:
        if self._closed:
            return
        if self._swapping is not None:
            await asyncio.wait([self._swapping])
        async with self._exclusive():
            self._closed = True
            await self._close_files()

    # Engine hooks.

    @abstractmethod
    def _new_segment(self, base_offset: int, now_ms: int) -> Segment:
        """A segment object for a roll; its storage may be created later by the writer."""

    @abstractmethod
    def _record_roll(self, old: Segment, new: Segment, seal_entry: tuple[int, int] | None) -> None:
        """Seal ``old`` (final time entry, flush) and make ``new``'s storage, in write order."""

    @abstractmethod
    async def _write(self, segment: Segment, data: bytes, placement: Placement) -> None:
        """Store ``data`` at ``placement``, make it visible in order, and return when durable."""

    @abstractmethod
    async def _idle(self) -> None:
        """Return when no write is pending."""

    @abstractmethod
    async def _create_segment(self, base_offset: int, now_ms: int) -> Segment:
        """A new, empty segment with its storage in place."""

    @abstractmethod
    async def _truncate_segment(self, segment: Segment, position: int) -> Segment:
        """Cut ``segment`` at ``position``; return its rebuilt state."""

    @abstractmethod
    async def _persist_log_start(self, offset: int) -> None:
        """Make ``offset`` the log start a reopened log begins at (durably, before returning)."""

    @abstractmethod
    async def _delete_segments(self, segments: list[Segment]) -> None: ...

    @abstractmethod
    async def _close_files(self) -> None: ...

    @abstractmethod
    async def _segment_reader(self, segment: Segment) -> SegmentReader:
        """A function that returns ``segment``'s visible bytes when called in a worker thread."""

    @abstractmethod
    def _stage_cleaned(self, old: Segment, data: bytes, rebuilt: Segment) -> SegmentData:
        """Store ``old``'s cleaned copy beside it, not replacing it yet (blocking, in a thread)."""

    @abstractmethod
    def _discard_cleaned(self, swaps: list[Swap]) -> None:
        """Remove staged copies that will not be swapped in (blocking)."""

    @abstractmethod
    async def _install_cleaned(self, swaps: list[Swap]) -> None:
        """Replace each old segment by its staged copy, or delete it for None, atomically per segment.

        Reads of the old segments must keep working until :meth:`_close_replaced`.
        """

    def _installed(self, segment: Segment) -> Segment:
        """The segment to put in the log for a cleaned copy :meth:`_install_cleaned` stored."""
        return segment

    @abstractmethod
    async def _close_replaced(self, segments: list[Segment]) -> None:
        """Release what the segments swapped out still hold (they are no longer in the log)."""

    @abstractmethod
    async def flush(self) -> None:
        """Make everything appended durable (a no-op where appends already are)."""
