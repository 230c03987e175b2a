"""A second coordinator type on the same runtime as groups: a tally coordinator that only tests use.

Its shard keeps a count per key; an ``add`` writes one record and answers after it is durable.
Writing, loading by replay after a restart, and owning partitions in a cluster (acquire, release,
NOT_COORDINATOR for a key elsewhere) all run through :class:`CoordinatorService`,
:class:`PartitionRunner` and :func:`replay_log`, the code that runs the group coordinator.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.plain_batch import EncodedBatch, encode_for_log
from kcoord.runtime.coordinator_type import CoordinatorType, FastReplay
from kcoord.runtime.runner import Sink
from kcoord.runtime.service import CoordinatorService
from kcoord.storage.api import PartitionLog
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.api import Timer
from kcoord.timer.clock import SystemClock

TALLY_TOPIC = "__tally_state"
PARTITIONS = 3


@dataclass(frozen=True, slots=True)
class TallyRecord:
    key: str
    total: int | None
    """None: a tombstone (the key is forgotten)."""


class TallySerde:
    """Key: the UTF-8 key behind a 0x7A7A type tag; value: the total as an int64."""

    def encode_batch(self, records: list[TallyRecord], now_ms: int) -> EncodedBatch:
        entries = [
            (b"\x7a\x7a" + r.key.encode(), None if r.total is None else struct.pack(">q", r.total))
            for r in records
        ]
        return encode_for_log(entries, now_ms)

    def decode(self, key: bytes, value: bytes | None) -> TallyRecord | None:
        if not key.startswith(b"\x7a\x7a"):
            return None
        return TallyRecord(key[2:].decode(), None if value is None else struct.unpack(">q", value)[0])

    def fast_replay(self, shard: Any) -> FastReplay | None:
        return None


def tally_partition(key: str, partitions: int) -> int:
    return zlib.crc32(key.encode()) % partitions


TALLY = CoordinatorType("tally", TALLY_TOPIC, 99, tally_partition, TallySerde())


class TallyShard:
    """Counts per key; state changes only by replaying records (live: once they are durable)."""

    def __init__(self, partition: int, timer: Timer) -> None:
        self.partition = partition
        self.totals: dict[str, int] = {}
        self.replayed: list[tuple[int, str]] = []

    def add(self, key: str, amount: int, sink: Sink) -> CoordinatorResult:
        total = self.totals.get(key, 0) + amount
        result = CoordinatorResult(records=[TallyRecord(key, total)])  # type: ignore[list-item]
        result.respond(sink, total)
        return result

    def replay(self, record: TallyRecord, offset: int, producer_id: int, producer_epoch: int) -> None:
        self.replayed.append((offset, record.key))
        self._apply(record)

    def replay_end_transaction_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        return None

    def on_appended(self, records: list[TallyRecord]) -> None:
        for record in records:
            self._apply(record)

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()

    def on_timer(self, key: str, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()

    def unload(self) -> CoordinatorResult:
        return CoordinatorResult()

    def _apply(self, record: TallyRecord) -> None:
        if record.total is None:
            self.totals.pop(record.key, None)
        else:
            self.totals[record.key] = record.total


class TallyTopic:
    """The tally topic on a memory store."""

    def __init__(self, store: MemoryLogStore) -> None:
        self.store = store

    async def ensure_topic(self, partitions: int) -> int:
        for partition in range(partitions):
            if self.store.get(TALLY_TOPIC, partition) is None:
                await self.store.create(TALLY_TOPIC, partition)
        return partitions

    def partition_log(self, partition: int) -> PartitionLog | None:
        return self.store.get(TALLY_TOPIC, partition)


def tally_service(store: MemoryLogStore, *, owned_only: bool = False) -> CoordinatorService:
    return CoordinatorService(
        TALLY, TallyTopic(store), SystemClock(), TallyShard, num_partitions=PARTITIONS, owned_only=owned_only
    )


async def add(service: CoordinatorService, key: str, amount: int) -> int:
    total: int = await service.write(key, lambda shard, sink, now_ms: shard.add(key, amount, sink))
    return total


def total(service: CoordinatorService, key: str) -> int | None:
    found: int | None = service.read(key, lambda shard: shard.totals.get(key))
    return found


def keys_on_distinct_partitions() -> tuple[str, str]:
    first = "a"
    other = next(
        k
        for k in (f"k{i}" for i in range(100))
        if tally_partition(k, PARTITIONS) != tally_partition(first, PARTITIONS)
    )
    return first, other


async def test_a_second_coordinator_type_writes_and_reloads_its_state_by_replay() -> None:
    """Writes answer after their records are durable; a new service on the same log replays them,
    each with its offset, into fresh shards that hold the same totals."""
    store = MemoryLogStore()
    await store.open()
    service = tally_service(store)
    await service.start()
    await asyncio.wait_for(service.loaded.wait(), 5)
    assert await add(service, "a", 2) == 2
    assert await add(service, "a", 3) == 5
    assert await add(service, "b", 7) == 7
    assert service.placement("a") == (TALLY_TOPIC, tally_partition("a", PARTITIONS))
    await service.stop()

    again = tally_service(store)
    await again.start()
    await asyncio.wait_for(again.loaded.wait(), 5)
    assert (total(again, "a"), total(again, "b"), total(again, "c")) == (5, 7, None)
    shard_of_a: TallyShard = again.read("a", lambda shard: shard)
    assert [entry for entry in shard_of_a.replayed if entry[1] == "a"] == [(0, "a"), (1, "a")]
    await again.stop()
    await store.close()


async def test_a_second_coordinator_type_serves_only_the_partitions_it_owns() -> None:
    """In cluster mode the service holds no partition until acquired; a key elsewhere, or a released
    partition, answers NOT_COORDINATOR, and an acquired partition loads what an earlier owner wrote."""
    store = MemoryLogStore()
    await store.open()
    writer = tally_service(store)
    await writer.start()
    await asyncio.wait_for(writer.loaded.wait(), 5)
    here, elsewhere = keys_on_distinct_partitions()
    await add(writer, here, 4)
    await writer.stop()

    owner = tally_service(store, owned_only=True)
    await owner.start()
    with pytest.raises(KafkaError) as refused:
        await add(owner, here, 1)
    assert refused.value.code == ErrorCode.not_coordinator
    partition = owner.partition_for(here)
    partition_log = store.get(TALLY_TOPIC, partition)
    assert partition_log is not None
    await owner.acquire(partition, partition_log)
    for _ in range(100):
        try:
            assert total(owner, here) == 4
            break
        except KafkaError as loading:
            assert loading.code == ErrorCode.coordinator_load_in_progress
            await asyncio.sleep(0.01)
    assert owner.owned_partitions() == [partition]
    assert await add(owner, here, 1) == 5
    with pytest.raises(KafkaError) as other:
        await add(owner, elsewhere, 1)
    assert other.value.code == ErrorCode.not_coordinator
    await owner.release(partition)
    with pytest.raises(KafkaError) as released:
        total(owner, here)
    assert released.value.code == ErrorCode.not_coordinator
    await owner.stop()
    await store.close()
