"""The engine-neutral part of a partition log: offsets, rolling, reads, retention, truncation.

Engines subclass :class:`SegmentedLog` and supply the I/O: how planned batches are written
(:meth:`~SegmentedLog._write`), how a roll is recorded, and the structural changes (segment
deletion, truncation, creation) that run while appends are held back by the log's gate.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import structlog

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import HEADER_SIZE, parse_header, prepare_for_append
from kcoord.storage.api import AppendListener, AppendResult, LogConfig
from kcoord.storage.segment import MAX_RELATIVE_OFFSET, Placement, Segment
from kcoord.timer.api import Clock

__all__ = ["SegmentedLog"]

logger = structlog.get_logger(__name__)


class SegmentedLog(ABC):
    """A partition log made of segments; subclasses do the I/O."""

    def __init__(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        segments: list[Segment],
    ) -> None:
        if not segments:
            raise ValueError("a log needs at least one segment")
        self._topic = topic
        self._partition = partition
        self._config = config
        self._clock = clock
        self._segments = segments
        self._log_start_offset = segments[0].base_offset
        self._next_offset = segments[-1].next_offset
        self._end_offset = self._next_offset
        self._gate: asyncio.Future[None] | None = None
        self._listeners: list[AppendListener] = []
        self._closed = False
        self._failure: BaseException | None = None

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
        while self._gate is not None:
            await asyncio.shield(self._gate)
        self._ensure_usable()
        header = parse_header(batch)
        if header.size != len(batch):
            raise ValueError(f"expected one batch of {header.size} bytes, got {len(batch)}")
        now = self._clock.now_ms()
        segment = self._segment_for_append(header.size, header.last_offset_delta, now)
        base_offset = self._next_offset
        log_append_time = now if self._config.message_timestamp_type == "LogAppendTime" else None
        data = prepare_for_append(batch, base_offset=base_offset, log_append_time_ms=log_append_time)
        max_timestamp = header.max_timestamp if log_append_time is None else log_append_time
        placement = segment.plan(
            base_offset, header.next_offset - header.base_offset + base_offset, max_timestamp, len(data)
        )
        self._next_offset = placement.next_offset
        await self._write(segment, data, placement)
        return AppendResult(
            base_offset=base_offset,
            last_offset=placement.next_offset - 1,
            log_append_time_ms=-1 if log_append_time is None else log_append_time,
            log_start_offset=self._log_start_offset,
        )

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

    def _ensure_usable(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log {self._topic}-{self._partition} is closed")
        if self._failure is not None:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log failed: {self._failure!r}")

    # Reading.

    def read(self, offset: int, max_bytes: int) -> bytes:
        if self._closed:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log {self._topic}-{self._partition} is closed")
        if offset < self._log_start_offset or offset > self._end_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {offset} outside [{self._log_start_offset}, {self._end_offset}]",
            )
        if offset == self._end_offset:
            return b""
        segment = self._segment_holding(offset)
        return segment.read_batches(segment.position_of(offset), max_bytes)

    def _segment_holding(self, offset: int) -> Segment:
        i = bisect_right(self._segments, offset, key=lambda segment: segment.base_offset) - 1
        return self._segments[max(i, 0)]

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
                doomed, self._segments = self._segments, []
                self._log_start_offset = self._next_offset = self._end_offset = offset
                await self._delete_segments(doomed)
                self._segments = [await self._create_segment(offset, self._clock.now_ms())]
            else:
                holder = self._segment_holding(offset)
                index = self._segments.index(holder)
                cut = holder.position_of(offset)
                self._next_offset = self._end_offset = parse_header(
                    holder.data.read_at(cut, HEADER_SIZE)
                ).base_offset
                holder.size = cut
                doomed = self._segments[index + 1 :]
                del self._segments[index + 1 :]
                await self._delete_segments(doomed)
                self._segments[index] = await self._truncate_segment(holder, cut)
            logger.info(
                "log.truncated", topic=self._topic, partition=self._partition, end_offset=self._end_offset
            )

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

    async def close(self) -> None:
        if self._closed:
            return
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
    async def _delete_segments(self, segments: list[Segment]) -> None: ...

    @abstractmethod
    async def _close_files(self) -> None: ...

    @abstractmethod
    async def flush(self) -> None:
        """Make everything appended durable (a no-op where appends already are)."""
