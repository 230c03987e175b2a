"""The shell around the pure coordinator shards: loading, appending, releasing, timers.

One :class:`PartitionRunner` per partition of ``__consumer_offsets``. Everything a shard does
runs synchronously on the event loop, so operations on one partition are serial without a lock;
the only waiting is for the log, and the log assigns offsets in call order, so appends (and the
responses they release) stay in operation order. Partitions never wait for each other.

The contract with a shard, after Kafka's ``CoordinatorRuntime``:

- an operation returns a :class:`CoordinatorResult` (records + responses);
- the records are appended as one batch; once durable they are handed to
  ``shard.on_appended`` and only then are the responses released (answer after durability);
- loading a partition replays every record through ``shard.replay``, the same path a restart
  or (later) a failover takes; until it finishes the partition answers COORDINATOR_LOAD_IN_PROGRESS;
- timers only enqueue an operation on the partition that owns them.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from kcoord.coordinator.record_codec import RecordDecodeError, decode_record, encode_key, encode_value
from kcoord.coordinator.records import CoordinatorRecord
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import KafkaError
from kcoord.storage.api import PartitionLog
from kcoord.timer.api import Clock, Timer

log = structlog.get_logger(__name__)

_REPLAY_YIELD_EVERY = 2000
_REPLAY_PROGRESS_EVERY_S = 2.0
_READ_CHUNK = 1 << 20


class Shard(Protocol):
    """What the runtime needs of a partition's state machines."""

    def replay(self, record: CoordinatorRecord) -> None:
        """Apply one record while loading."""

    def on_appended(self, records: list[CoordinatorRecord]) -> None:
        """Records of a live operation are durable."""

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        """Loading finished: arm timers for what was loaded."""

    def on_timer(self, key: str, now_ms: int) -> CoordinatorResult: ...

    def unload(self) -> CoordinatorResult:
        """The partition goes away: fail parked requests."""


class Sink:
    """The waiting client of one request: a future the edge awaits."""

    __slots__ = ("_future",)

    def __init__(self) -> None:
        self._future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def deliver(self, response: Any) -> None:
        if not self._future.done():
            self._future.set_result(response)

    def fail(self, error: BaseException) -> None:
        if not self._future.done():
            self._future.set_exception(error)

    @property
    def done(self) -> bool:
        return self._future.done()

    def __await__(self) -> Any:
        return self._future.__await__()


class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    CLOSED = "closed"


class PrefixedTimer:
    """A shard's view of the shared wheel: its keys carry the partition so expiries find their way back."""

    def __init__(self, timer: Timer, partition: int) -> None:
        self._timer = timer
        self._prefix = f"{partition}|"

    def schedule(self, key: str, deadline_ms: int) -> None:
        self._timer.schedule(self._prefix + key, deadline_ms)

    def cancel(self, key: str) -> None:
        self._timer.cancel(self._prefix + key)

    def deadline(self, key: str) -> int | None:
        return self._timer.deadline(self._prefix + key)


def split_timer_key(key: str) -> tuple[int, str]:
    partition, _, inner = key.partition("|")
    return int(partition), inner


@dataclass(slots=True)
class LoadStats:
    records: int = 0
    batches: int = 0
    skipped: int = 0
    seconds: float = 0.0


def encode_batch(records: list[CoordinatorRecord], now_ms: int) -> bytes:
    """One uncompressed batch holding ``records`` (offsets relative; the log assigns the base)."""
    timestamp = TZAwareMicros.parse(datetime.datetime.fromtimestamp(now_ms / 1000, tz=datetime.UTC))
    kio_records = tuple(
        Record(
            attributes=i8(0),
            timestamp=timestamp,
            offset=i64(i),
            key=encode_key(r.key),
            value=encode_value(r.value),
            headers=(),
        )
        for i, r in enumerate(records)
    )
    batch = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        partition_leader_epoch=i32(-1),
        base_sequence=i32(-1),
        records=kio_records,
        attributes=i16(0),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


class PartitionRunner:
    def __init__(self, partition: int, shard: Shard, partition_log: PartitionLog, clock: Clock) -> None:
        self.partition = partition
        self.shard = shard
        self.log = partition_log
        self.clock = clock
        self.state = PartitionState.LOADING
        self.load_stats = LoadStats()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._log = log.bind(partition=partition)

    def check_active(self) -> None:
        if self.state is PartitionState.LOADING:
            raise KafkaError(ErrorCode.coordinator_load_in_progress)
        if self.state is not PartitionState.ACTIVE:
            raise KafkaError(ErrorCode.not_coordinator)

    def run(self, operation: Callable[[int], CoordinatorResult]) -> None:
        """Run one operation now and hand its result on (append, then release)."""
        self.check_active()
        self.submit(operation(self.clock.now_ms()))

    def submit(self, result: CoordinatorResult) -> None:
        if not result.records:
            _release(result)
            return
        task = asyncio.get_running_loop().create_task(self._append_then_release(result))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _append_then_release(self, result: CoordinatorResult) -> None:
        try:  # encoding inside: a record that cannot be written must still answer its callers
            await self.log.append(encode_batch(result.records, self.clock.now_ms()))
        except Exception:
            self._log.exception("offsets_log.append_failed", records=len(result.records))
            error = KafkaError(ErrorCode.coordinator_not_available)
            for sink, _ in result.responses:
                sink.fail(error)
            return
        self.shard.on_appended(result.records)
        _release(result)

    async def load(self) -> None:
        """Replay the partition from its log start; yields to the loop as it goes."""
        started = time.perf_counter()
        last_progress = started
        offset = self.log.log_start_offset
        end = self.log.log_end_offset
        stats = self.load_stats
        since_yield = 0
        while offset < end:
            chunk = self.log.read(offset, _READ_CHUNK)
            if not chunk:
                break
            position = 0
            while position < len(chunk):
                try:
                    batch, size = read_batch(chunk, position)
                except Exception:
                    break  # a batch cut by the chunk limit: read again from its offset
                position += size
                stats.batches += 1
                for record in batch.records:
                    since_yield += 1
                    offset = int(record.offset) + 1
                    self._replay_one(record.key, record.value)
                offset = max(offset, int(batch.base_offset) + int(batch.last_offset_delta) + 1)
            if position == 0:
                self._log.error("offsets_log.unreadable_batch", offset=offset)
                break
            if since_yield >= _REPLAY_YIELD_EVERY:
                since_yield = 0
                await asyncio.sleep(0)
                now = time.perf_counter()
                if now - last_progress >= _REPLAY_PROGRESS_EVERY_S:
                    last_progress = now
                    self._log.info(
                        "offsets_partition.loading", offset=offset, end_offset=end, records=stats.records
                    )
        stats.seconds = time.perf_counter() - started
        self.state = PartitionState.ACTIVE
        self.submit(self.shard.on_loaded(self.clock.now_ms()))
        emit = self._log.info if stats.batches else self._log.debug
        emit(
            "offsets_partition.loaded",
            records=stats.records,
            batches=stats.batches,
            skipped=stats.skipped,
            duration_ms=round(stats.seconds * 1000, 1),
        )

    def _replay_one(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            self.load_stats.skipped += 1
            return
        try:
            record = decode_record(key, value)
        except RecordDecodeError as exc:
            self.load_stats.skipped += 1
            self._log.warning("offsets_log.bad_record", error=str(exc))
            return
        if record is None:
            self.load_stats.skipped += 1
            return
        self.load_stats.records += 1
        self.shard.replay(record)

    async def close(self) -> None:
        """Fail parked requests, wait for in-flight appends."""
        if self.state is PartitionState.ACTIVE:
            _release(self.shard.unload())
        self.state = PartitionState.CLOSED
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=5)


def _release(result: CoordinatorResult) -> None:
    for sink, response in result.responses:
        if isinstance(response, BaseException):
            sink.fail(response)
        else:
            sink.deliver(response)
