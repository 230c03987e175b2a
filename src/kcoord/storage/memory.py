"""The ``memory://`` engine: the same log contract with segments held in bytearrays.

Nothing survives the process. Segments, indexes, rolling and retention behave as in the file
engine, so unit tests of other modules see the same offsets and the same retention.
"""

from __future__ import annotations

from kcoord.storage.api import LogConfig, PartitionLog
from kcoord.storage.compaction import SegmentReader, Swap
from kcoord.storage.log import SegmentedLog
from kcoord.storage.segment import Placement, Segment, SegmentData, scan_segment
from kcoord.storage.store_base import StoreBase
from kcoord.timer.api import Clock

__all__ = ["MemoryLog", "MemoryLogStore"]


class MemorySegmentData:
    """A segment's bytes in a growable buffer."""

    def __init__(self, data: bytes = b"") -> None:
        self.buffer = bytearray(data)

    def read_at(self, position: int, size: int) -> bytes:
        return bytes(memoryview(self.buffer)[position : position + size])


class MemoryLog(SegmentedLog):
    """A partition log in memory; appends are visible (and as durable as they get) at once."""

    def __init__(self, topic: str, partition: int, config: LogConfig, clock: Clock) -> None:
        first = Segment(0, MemorySegmentData(), config.index_interval_bytes, clock.now_ms())
        super().__init__(topic, partition, config, clock, [first])

    def _new_segment(self, base_offset: int, now_ms: int) -> Segment:
        return Segment(base_offset, MemorySegmentData(), self._config.index_interval_bytes, now_ms)

    def _record_roll(self, old: Segment, new: Segment, seal_entry: tuple[int, int] | None) -> None:
        if seal_entry is not None:
            old.add_time_entry(seal_entry)

    async def _write(self, segment: Segment, data: bytes, placement: Placement) -> None:
        buffer = _buffer_of(segment)
        if len(buffer) != placement.position:
            raise RuntimeError("memory segment out of step with its placement")
        buffer += data
        self._made_visible(segment, placement)
        self._notify()

    async def _idle(self) -> None:
        return None

    async def _create_segment(self, base_offset: int, now_ms: int) -> Segment:
        return self._new_segment(base_offset, now_ms)

    async def _truncate_segment(self, segment: Segment, position: int) -> Segment:
        del _buffer_of(segment)[position:]
        return scan_segment(
            segment.base_offset,
            segment.data,
            position,
            index_interval_bytes=self._config.index_interval_bytes,
            created_ms=segment.created_ms,
            verify_crc=False,
        )

    async def _persist_log_start(self, offset: int) -> None:
        return None

    async def _delete_segments(self, segments: list[Segment]) -> None:
        for segment in segments:
            _buffer_of(segment).clear()

    async def _close_files(self) -> None:
        return None

    async def flush(self) -> None:
        return None

    async def _segment_reader(self, segment: Segment) -> SegmentReader:
        snapshot = bytes(_buffer_of(segment)[: segment.size])
        return lambda: snapshot

    def _stage_cleaned(self, old: Segment, data: bytes, rebuilt: Segment) -> SegmentData:
        return MemorySegmentData(data)

    def _discard_cleaned(self, swaps: list[Swap]) -> None:
        return None

    async def _install_cleaned(self, swaps: list[Swap]) -> None:
        return None

    async def _close_replaced(self, segments: list[Segment]) -> None:
        return None


def _buffer_of(segment: Segment) -> bytearray:
    data = segment.data
    if not isinstance(data, MemorySegmentData):
        raise TypeError("memory log holds a foreign segment")
    return data.buffer


class MemoryLogStore(StoreBase[MemoryLog]):
    """``memory://``: logs live as long as the store object."""

    async def open(self) -> None:
        self._start_background()

    async def create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        existing = self._open_log(topic, partition, config)
        if existing is not None:
            return existing
        return self._adopt(MemoryLog(topic, partition, config or self._default_config, self._clock))

    async def delete_topic(self, topic: str) -> None:
        for key in [key for key in self._logs if key[0] == topic]:
            await self._logs.pop(key).close()

    async def close(self) -> None:
        await self._stop_and_close_logs()
