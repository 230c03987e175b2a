"""The group coordinator service: partition routing, reads and writes, timers and periodic expiry.

Runs on a real event loop with hand-written fakes for the offsets topic (in-memory partition
logs) and the shards (recording what they are asked to do).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kcoord.coordinator.partitioner import partition_for
from kcoord.coordinator.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import KafkaError
from kcoord.runtime.group_coordinator import OFFSETS_TOPIC, GroupCoordinator
from kcoord.runtime.runner import PartitionState
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.api import Timer
from kcoord.timer.clock import SystemClock

PARTITIONS = 4


class FakeOffsetsTopic:
    """``__consumer_offsets`` on a memory store, created with the partition count asked for."""

    def __init__(self, store: MemoryLogStore, *, real_partitions: int | None = None) -> None:
        self.store = store
        self.real_partitions = real_partitions
        self.asked: int | None = None

    async def ensure_offsets_topic(self, partitions: int) -> int:
        self.asked = partitions
        count = self.real_partitions or partitions
        for partition in range(count):
            await self.store.create(OFFSETS_TOPIC, partition)
        return count

    def partition_log(self, name: str, partition: int) -> Any:
        return self.store.get(name, partition)


class RecordingShard:
    """A shard that remembers its partition and timer and records every call."""

    def __init__(self, partition: int, timer: Timer) -> None:
        self.partition = partition
        self.timer = timer
        self.fired: list[str] = []
        self.expiries = 0
        self.unloaded = False
        self.replayed: list[CoordinatorRecord] = []
        self.applied: list[CoordinatorRecord] = []
        self.timer_fired = asyncio.Event()
        self.expired = asyncio.Event()

    def replay(self, record: CoordinatorRecord, offset: int, producer_id: int, producer_epoch: int) -> None:
        self.replayed.append(record)

    def on_appended(self, records: list[CoordinatorRecord]) -> None:
        self.applied.extend(records)

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()

    def on_timer(self, key: str, now_ms: int) -> CoordinatorResult:
        self.fired.append(key)
        self.timer_fired.set()
        return CoordinatorResult()

    def expire_offsets(self, now_ms: int) -> CoordinatorResult:
        self.expiries += 1
        self.expired.set()
        return CoordinatorResult()

    def unload(self) -> CoordinatorResult:
        self.unloaded = True
        return CoordinatorResult()


class Fixture:
    def __init__(self, expiry_interval_ms: int = 600_000, real_partitions: int | None = None) -> None:
        self.store = MemoryLogStore()
        self.topic = FakeOffsetsTopic(self.store, real_partitions=real_partitions)
        self.shards: dict[int, RecordingShard] = {}
        self.service = GroupCoordinator(
            self.topic,
            SystemClock(),
            self._new_shard,
            num_partitions=PARTITIONS,
            expiry_interval_ms=expiry_interval_ms,
        )

    def _new_shard(self, partition: int, timer: Timer) -> RecordingShard:
        shard = RecordingShard(partition, timer)
        self.shards[partition] = shard
        return shard

    async def start(self) -> GroupCoordinator:
        await self.store.open()
        await self.service.start()
        return self.service

    async def stop(self) -> None:
        await self.service.stop()
        await self.store.close()


@pytest.fixture
async def fixture() -> AsyncIterator[Fixture]:
    made = Fixture()
    await made.start()
    await asyncio.wait_for(made.service.loaded.wait(), 5)
    try:
        yield made
    finally:
        await made.stop()


def commit(group: str, offset: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        OffsetCommitKey(group, "orders", 0),
        OffsetCommitValue(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=1),
    )


async def test_start_creates_one_runner_per_offsets_partition_the_topic_really_has() -> None:
    """The service asks for its partition count and runs one shard per partition the topic reports."""
    made = Fixture(real_partitions=3)
    service = await made.start()
    try:
        assert made.topic.asked == PARTITIONS
        assert service.num_partitions == 3
        assert sorted(made.shards) == [0, 1, 2]
        assert [r.partition for r in service.all_runners()] == [0, 1, 2]
    finally:
        await made.stop()


async def test_requests_before_the_load_finishes_get_load_in_progress() -> None:
    """Right after start the partitions are loading: reads and writes get COORDINATOR_LOAD_IN_PROGRESS."""
    made = Fixture()
    service = await made.start()
    try:
        with pytest.raises(KafkaError) as read_error:
            service.read("g", lambda shard: shard)
        assert read_error.value.code == ErrorCode.coordinator_load_in_progress
        with pytest.raises(KafkaError) as write_error:
            await service.write("g", lambda shard, sink, now: CoordinatorResult())
        assert write_error.value.code == ErrorCode.coordinator_load_in_progress
        await asyncio.wait_for(service.loaded.wait(), 5)
        assert service.read("g", lambda shard: shard.partition) == partition_for("g", PARTITIONS)
    finally:
        await made.stop()


async def test_a_group_is_served_by_the_shard_of_its_partition(fixture: Fixture) -> None:
    """Reads and writes of a group run on the shard of partition_for(group_id), whatever the group."""
    service = fixture.service
    for group in ("alpha", "beta", "gamma", "delta", "epsilon"):
        expected = partition_for(group, PARTITIONS)
        assert service.partition_for(group) == expected
        assert service.read(group, lambda shard: shard.partition) == expected

        def echo(shard: Any, sink: Any, now: int) -> CoordinatorResult:
            return CoordinatorResult(responses=[(sink, shard.partition)])

        assert await service.write(group, echo) == expected


async def test_write_answers_after_its_records_are_in_the_partition_log(fixture: Fixture) -> None:
    """A write's records go to the group's own offsets partition before its response comes back."""
    service = fixture.service
    partition = service.partition_for("g")

    def commit_one(shard: Any, sink: Any, now: int) -> CoordinatorResult:
        return CoordinatorResult(records=[commit("g", 5)], responses=[(sink, "done")])

    assert await service.write("g", commit_one) == "done"
    logs = {p: fixture.store.get(OFFSETS_TOPIC, p) for p in range(PARTITIONS)}
    assert {p: log.log_end_offset for p, log in logs.items() if log is not None} == {
        p: (1 if p == partition else 0) for p in range(PARTITIONS)
    }
    assert fixture.shards[partition].applied == [commit("g", 5)]


async def test_a_shards_timer_fires_on_that_shard_with_its_own_key(fixture: Fixture) -> None:
    """A deadline a shard sets through its timer comes back to that shard's on_timer with the key it chose."""
    shard = fixture.shards[2]
    shard.timer.schedule("session:g:m", SystemClock().now_ms() + 5)
    await asyncio.wait_for(shard.timer_fired.wait(), 2)
    assert shard.fired == ["session:g:m"]
    assert all(other.fired == [] for p, other in fixture.shards.items() if p != 2)


async def test_same_timer_key_on_two_partitions_stays_apart(fixture: Fixture) -> None:
    """Two shards may use the same key; each deadline fires only on its own shard."""
    now = SystemClock().now_ms()
    fixture.shards[0].timer.schedule("join:g", now + 5)
    fixture.shards[1].timer.schedule("join:g", now + 5)
    fixture.shards[0].timer.cancel("join:g")
    await asyncio.wait_for(fixture.shards[1].timer_fired.wait(), 2)
    await asyncio.sleep(0.02)
    assert (fixture.shards[0].fired, fixture.shards[1].fired) == ([], ["join:g"])


async def test_offsets_expire_periodically_on_every_loaded_partition() -> None:
    """Every offsets.retention.check.interval.ms, each active shard is asked to expire offsets."""
    made = Fixture(expiry_interval_ms=10)
    await made.start()
    try:
        await asyncio.wait_for(asyncio.gather(*(s.expired.wait() for s in made.shards.values())), 2)
        assert all(shard.expiries >= 1 for shard in made.shards.values())
    finally:
        await made.stop()


async def test_stop_unloads_every_shard_and_later_writes_get_not_coordinator(fixture: Fixture) -> None:
    """Stopping closes every partition (shards unloaded); later work is refused with NOT_COORDINATOR."""
    service = fixture.service
    await service.stop()
    assert all(shard.unloaded for shard in fixture.shards.values())
    assert all(r.state is PartitionState.CLOSED for r in service.all_runners())
    assert list(service.active_shards()) == []
    with pytest.raises(KafkaError) as raised:
        service.read("g", lambda shard: shard)
    assert raised.value.code == ErrorCode.not_coordinator


async def test_load_replays_what_an_earlier_service_wrote() -> None:
    """Records written through one service are replayed into the shard of a new service on the same logs."""
    made = Fixture()
    service = await made.start()
    await asyncio.wait_for(service.loaded.wait(), 5)

    def commit_one(shard: Any, sink: Any, now: int) -> CoordinatorResult:
        return CoordinatorResult(records=[commit("g", 11)], responses=[(sink, None)])

    await service.write("g", commit_one)
    await service.stop()
    again = GroupCoordinator(
        made.topic, SystemClock(), made._new_shard, num_partitions=PARTITIONS, expiry_interval_ms=600_000
    )
    await again.start()
    try:
        await asyncio.wait_for(again.loaded.wait(), 5)
        assert made.shards[again.partition_for("g")].replayed == [commit("g", 11)]
    finally:
        await again.stop()
        await made.store.close()
