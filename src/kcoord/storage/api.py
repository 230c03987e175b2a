"""The narrow interface every log engine implements, opened by URL (see :mod:`kcoord.storage.store`).

A :class:`PartitionLog` is one topic-partition: an append-only sequence of record batches with
offsets assigned by the log. A :class:`LogStore` holds the logs of one node. Engines:
``file:///path`` (:mod:`kcoord.storage.file_store`), ``memory://`` (:mod:`kcoord.storage.memory`) and
``postgresql://`` (:mod:`kcoord.storage.postgres`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from kcoord.protocol.plain_batch import EncodedBatch

__all__ = [
    "AppendListener",
    "AppendResult",
    "CleanupPolicy",
    "CompactionResult",
    "FirstUnstableOffset",
    "LogConfig",
    "LogStore",
    "PartitionLog",
    "StorageTimings",
    "TopicInfo",
]

FlushPolicy = Literal["always", "interval"]
TimestampType = Literal["CreateTime", "LogAppendTime"]
CleanupPolicy = Literal["delete", "compact", "compact,delete", "delete,compact"]

AppendListener = Callable[[int], None]
"""Called with the new log end offset each time appended data becomes readable."""

FirstUnstableOffset = Callable[[str, int], int | None]
"""(topic, partition) -> the first offset of the partition's oldest open transaction, or None: the
log cleaner leaves every segment reaching that offset alone, as Kafka's cleaner stops at the last
stable offset. Set on a store by the composition root (the producer state knows it)."""


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic as a topic catalogue holds it (a file or a table); replaced, never mutated, on change."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)
    """Overrides only, with Kafka's topic config names (see ``kcoord.cluster.topic_configs``)."""
    internal: bool = False


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-partition settings, with Kafka's topic-config names (dots as underscores) and defaults."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000
    """-1 keeps data forever."""
    retention_bytes: int = -1
    """-1 keeps data of any size."""
    index_interval_bytes: int = 4096
    flush_policy: FlushPolicy = "always"
    """"always": an append returns after fsync; "interval": fsync every ``flush_interval_ms``."""
    flush_interval_ms: int = 1000
    message_timestamp_type: TimestampType = "CreateTime"
    cleanup_policy: CleanupPolicy = "delete"
    """"delete": retention by time/size; "compact": keep the latest record per key; or both."""
    delete_retention_ms: int = 86400000
    """How long a tombstone stays after the pass that first compacted it (KIP-534's delete horizon)."""
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0

    @property
    def deletes(self) -> bool:
        """Whether retention by time/size applies."""
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        """Whether the log cleaner compacts this log."""
        return "compact" in self.cleanup_policy


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction pass over a log did (also logged as ``log.compacted``)."""

    segments: int
    records_before: int
    records_after: int
    bytes_before: int
    bytes_after: int
    duration_ms: float


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int
    """The broker's time stamped on the batch, or -1 for CreateTime topics."""
    log_start_offset: int


class StorageTimings(Protocol):
    """Where a store reports how long appends and fsyncs take (the metrics live at the edge)."""

    def on_append(self, topic: str, partition: int, size: int, seconds: float) -> None: ...

    def on_flush(self, topic: str, partition: int, seconds: float) -> None: ...


class PartitionLog(Protocol):
    """One topic-partition's log. Writes are awaited; reads are :meth:`read_async` (every engine) or
    :meth:`read` (bytes already at hand)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def config(self) -> LogConfig: ...

    @property
    def log_start_offset(self) -> int:
        """The first offset still held."""

    @property
    def log_end_offset(self) -> int:
        """One past the last readable offset (the high watermark on a single node)."""

    @property
    def leader_epoch(self) -> int:
        """The leader epoch of this partition while this node leads it (KIP-101): the owner epoch in a
        cluster, 0 for a node alone. Stamped on every batch appended."""

    @property
    def size_bytes(self) -> int:
        """Bytes held in all segments."""

    @property
    def segment_count(self) -> int: ...

    async def append(self, batch: bytes) -> AppendResult:
        """Append one magic-2 batch (already validated).

        Offsets are assigned in call order before the first suspension, so concurrent calls get
        increasing offsets. Returns once the batch is readable (and fsynced under "always").
        """

    def append_soon(
        self,
        batch: bytes | EncodedBatch,
        on_written: Callable[[asyncio.Future[None]], None] | None = None,
    ) -> asyncio.Future[None] | None:
        """:meth:`append` without a task, for a caller that needs no :class:`AppendResult`.

        An :class:`EncodedBatch` (built in this process) brings its header facts along and is not
        parsed again; plain bytes get :meth:`append`'s checks.

        Returns a future done once the batch is readable (and fsynced under "always"), failed as
        :meth:`append` would raise; or None when the log cannot take it at once (held back by a
        structural change, recovering, closed), and the caller uses :meth:`append` instead.
        ``on_written(future)`` is called on the loop once that future is done: by the file engine
        right as its write round completes (no loop callback per append), else as a done-callback.
        """

    async def read_async(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` but at least one batch.

        ``b""`` at the log end; ``KafkaError(offset_out_of_range)`` outside ``[start, end]``. The
        file and memory engines answer without suspending; ``postgresql://`` reads batches its
        cache does not hold from the database (KAFKA_STORAGE_ERROR while it is unreachable).
        """

    def read(self, offset: int, max_bytes: int) -> bytes:
        """:meth:`read_async` for bytes at hand (page cache, memory), without suspending.

        ``postgresql://`` serves only the cached batches from ``offset`` on and raises
        ``KafkaError(kafka_storage_error)`` when the first is not cached: code that may meet cold
        data uses :meth:`read_async`.
        """

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(base offset, max timestamp) of the first batch whose max timestamp is >= ``timestamp_ms``."""

    def max_timestamp(self) -> tuple[int, int]:
        """(base offset, timestamp) of the batch with the largest timestamp; (-1, -1) when empty."""

    async def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (DeleteRecords); return the log start after.

        Never moves it down; segments wholly below it go. Durable when it returns: a reopened log
        starts there. ``KafkaError(offset_out_of_range)`` when ``offset`` is past the log end.
        """

    async def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= ``offset`` (the batch holding ``offset`` included)."""

    async def enforce_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms/retention.bytes; return how many were deleted."""

    async def compact(self, now_ms: int) -> CompactionResult | None:
        """Compact the closed segments now, whatever the dirty ratio; None when there was nothing to do.

        Keeps the latest record per key, offsets unchanged; see :mod:`kcoord.storage.compaction`.
        """

    async def flush(self) -> None:
        """Make everything appended so far durable (what "always" does on every append)."""

    def update_config(self, config: LogConfig) -> None: ...

    def add_append_listener(self, listener: AppendListener) -> Callable[[], None]:
        """Register ``listener``; the returned function unregisters it."""

    async def close(self) -> None:
        """Finish pending writes, flush, release files; later appends and reads raise."""


class LogStore(Protocol):
    """The logs of one node."""

    timings: StorageTimings | None
    """Told of append and fsync latencies of every log; set before ``open()``."""

    first_unstable: FirstUnstableOffset | None
    """Where each log's cleaner stops (its oldest open transaction); set before ``open()``."""

    async def open(self) -> None:
        """Load (and recover) the logs already stored; start background retention and the cleaner."""

    def partitions(self) -> list[tuple[str, int]]:
        """(topic, partition) of every log held, sorted."""

    def get(self, topic: str, partition: int) -> PartitionLog | None: ...

    async def create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The log of (topic, partition), created if missing; an existing log takes ``config``."""

    def configure(self, topic: str, partition: int, config: LogConfig) -> None:
        """Give the partition's log ``config``: now if it is open, and when it is opened later (an
        engine that opens logs on a claim keeps it for then)."""

    async def delete_topic(self, topic: str) -> None: ...

    async def enforce_retention(self) -> int:
        """Run one retention pass over every log now; return how many segments were deleted."""

    async def compact_logs(self) -> int:
        """Run one cleaner pass now: compact every log that is due; return how many were compacted."""

    async def close(self) -> None: ...
