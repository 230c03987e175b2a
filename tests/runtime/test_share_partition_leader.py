"""The share partitions' leader on the real runtime and memory logs: acquiring from a log, locks that
expire on the timing wheel, acknowledgements answered once durable, and a restart that redelivers
exactly what was not acknowledged."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partition_state import AcknowledgeType
from kcoord.coordinator.share.state_records import SHARE_STATE_TOPIC, ShareStateKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.plain_batch import encode_for_log
from kcoord.runtime.share_coordinator import ShareCoordinator, ShareStateTopicOf, new_state_shard
from kcoord.runtime.share_partition_leader import SharePartitionLeader
from kcoord.storage.api import PartitionLog
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.clock import SystemClock

TOPIC_ID = uuid.UUID(int=7)
TP = (TOPIC_ID, 0)
CONFIG = ShareGroupConfig(record_lock_duration_ms=150, delivery_count_limit=3, auto_offset_reset="earliest")


class Catalogue:
    def __init__(self, store: MemoryLogStore) -> None:
        self.store = store
        self.refusals = 0
        """How many more creations of the state topic fail (as a full disk or a lost lease would)."""

    def partition_log(self, name: str, partition: int) -> PartitionLog | None:
        return self.store.get(name, partition)

    def state_partitions(self) -> int | None:
        return 2 if self.store.get(SHARE_STATE_TOPIC, 0) is not None else None

    async def create(self, partitions: int, configs: object) -> None:
        if self.refusals:
            self.refusals -= 1
            raise KafkaError(ErrorCode.kafka_storage_error, "the state topic could not be made")
        for partition in range(partitions):
            await self.store.create(SHARE_STATE_TOPIC, partition)


@dataclass
class Node:
    state: ShareCoordinator
    leader: SharePartitionLeader

    async def stop(self) -> None:
        await self.leader.stop()
        await self.state.stop()


class WriteCounter:
    """Counts the durable write rounds and the acknowledgements they answered (a ShareObserver)."""

    def __init__(self) -> None:
        self.rounds: list[int] = []

    def acquired(self, records: int) -> None:
        return None

    def acknowledged(self, acknowledge_type: int, records: int) -> None:
        return None

    def locks_expired(self, records: int) -> None:
        return None

    def state_written(self, acknowledgements: int) -> None:
        self.rounds.append(acknowledgements)


def start_node(store: MemoryLogStore, refusals: int = 0, observer: WriteCounter | None = None) -> Node:
    catalogue = Catalogue(store)
    catalogue.refusals = refusals
    clock = SystemClock()
    state = ShareCoordinator(
        ShareStateTopicOf(catalogue, catalogue.state_partitions, catalogue.create),
        clock,
        new_state_shard(CONFIG),
        num_partitions=2,
    )
    leader = SharePartitionLeader(
        CONFIG,
        state,
        lambda topic_id, partition: store.get("queue", partition) if topic_id == TOPIC_ID else None,
        clock,
        max_sessions=10,
        observer=observer,
    )
    leader.start()
    return Node(state, leader)


@pytest.fixture
async def store() -> AsyncIterator[MemoryLogStore]:
    store = MemoryLogStore()
    await store.open()
    queue = await store.create("queue", 0)
    await queue.append(encode_for_log([(None, str(n).encode()) for n in range(10)], 0).data)
    yield store
    await store.close()


async def acquired(node: Node, member: str, max_records: int = 100) -> list[tuple[int, int, int]]:
    await node.leader.ensure_loaded("g", TP)
    _, runs = await node.leader.acquire("g", member, TP, max_records, 1 << 20)
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in runs]


async def test_a_lock_expires_on_the_wheel_and_the_record_is_delivered_again(store: MemoryLogStore) -> None:
    """Records a member never acknowledges are Available again once the lock passes: another member
    acquires them with delivery count 2; at the count limit they are archived instead."""
    node = start_node(store)
    try:
        assert await acquired(node, "a", max_records=4) == [(0, 3, 1)]
        assert await acquired(node, "b", max_records=100) == [(4, 9, 1)]
        await asyncio.sleep(0.4)
        assert await acquired(node, "b") == [(0, 9, 2)]
        await asyncio.sleep(0.4)
        assert await acquired(node, "a") == [(0, 9, 3)]
        await asyncio.sleep(0.4)
        assert await acquired(node, "a") == []
    finally:
        await node.stop()


async def test_acknowledgements_survive_a_restart_and_the_rest_is_redelivered(store: MemoryLogStore) -> None:
    """Accepted and rejected records are never delivered again after a restart; acquired but
    unacknowledged ones are (their delivery count survives only if it was written)."""
    node = start_node(store)
    try:
        assert await acquired(node, "a") == [(0, 9, 1)]
        accept, reject = (0, 3, (AcknowledgeType.ACCEPT,)), (4, 4, (AcknowledgeType.REJECT,))
        assert await node.leader.acknowledge("g", "a", TP, [accept, reject]) == ErrorCode.none
        wrong = await node.leader.acknowledge("g", "b", TP, [(5, 5, (AcknowledgeType.ACCEPT,))])
        assert wrong == ErrorCode.invalid_record_state
    finally:
        await node.stop()
    again = start_node(store)
    try:
        assert await acquired(again, "c") == [(5, 9, 1)]
    finally:
        await again.stop()


async def test_deleting_the_group_deletes_its_share_state(store: MemoryLogStore) -> None:
    """After DeleteGroups' hook, neither this node nor a restarted one remembers the group's
    acknowledgements: the share partition starts afresh by share.auto.offset.reset."""
    node = start_node(store)
    try:
        assert await acquired(node, "a") == [(0, 9, 1)]
        assert (
            await node.leader.acknowledge("g", "a", TP, [(0, 9, (AcknowledgeType.ACCEPT,))]) == ErrorCode.none
        )
        assert await acquired(node, "a") == []
        await node.leader.delete_groups(["g"])
        assert await acquired(node, "a") == [(0, 9, 1)]
    finally:
        await node.stop()


async def test_a_state_topic_that_could_not_be_made_is_tried_again(store: MemoryLogStore) -> None:
    """The first share fetch fails with the catalogue's error when ``__share_group_state`` cannot be
    made; the next one makes it and proceeds."""
    node = start_node(store, refusals=1)
    try:
        with pytest.raises(KafkaError) as refused:
            await node.leader.ensure_loaded("g", TP)
        assert refused.value.code == ErrorCode.kafka_storage_error
        assert await acquired(node, "a") == [(0, 9, 1)]
    finally:
        await node.stop()


async def test_an_acknowledgement_whose_write_fails_changes_nothing(store: MemoryLogStore) -> None:
    """With ``__share_group_state`` unwritable the acknowledgement gets the write's error and the
    records stay Acquired by the member (the start offset does not move), so after the lock they are
    delivered again rather than lost as if accepted."""
    node = start_node(store)
    try:
        assert await acquired(node, "a", max_records=4) == [(0, 3, 1)]
        for partition in range(2):
            state_log = store.get(SHARE_STATE_TOPIC, partition)
            assert state_log is not None
            await state_log.close()
        code = await node.leader.acknowledge("g", "a", TP, [(0, 3, (AcknowledgeType.ACCEPT,))])
        assert code == ErrorCode.not_coordinator
        assert (await node.leader.describe_offset("g", TP))[0] == 0
        again = await node.leader.acknowledge("g", "b", TP, [(0, 3, (AcknowledgeType.ACCEPT,))])
        assert again == ErrorCode.invalid_record_state, "the records are still a's, not settled"
        await asyncio.sleep(0.4)
        assert await acquired(node, "b", max_records=4) == [(0, 3, 2)]
    finally:
        await node.stop()


async def test_concurrent_acknowledgements_of_one_partition_share_write_rounds(store: MemoryLogStore) -> None:
    """Sixteen members acknowledging one share partition at once are answered by a few write rounds
    (what arrives while one is written goes into the next), each answer only once its round is durable."""
    queue = store.get("queue", 0)
    assert queue is not None
    await queue.append(encode_for_log([(None, b"more") for _ in range(6)], 0).data)
    counter = WriteCounter()
    node = start_node(store, observer=counter)
    try:
        members = [f"m{n}" for n in range(16)]
        for n, member in enumerate(members):
            assert await acquired(node, member, max_records=1) == [(n, n, 1)]
        counter.rounds.clear()

        async def accept(n: int) -> tuple[ErrorCode, int]:
            code = await node.leader.acknowledge("g", members[n], TP, [(n, n, (AcknowledgeType.ACCEPT,))])
            stored = await node.state.stored_state(ShareStateKey("g", *TP))
            return code, -1 if stored is None else stored.start_offset + stored.delivery_complete_count

        answers = []
        for n in range(16):  # staggered: the first round is under way when the rest arrive
            answers.append(asyncio.ensure_future(accept(n)))
            await asyncio.sleep(0)
        results = await asyncio.gather(*answers)
        assert all(code == ErrorCode.none for code, _ in results)
        assert all(durable > n for n, (_, durable) in enumerate(results)), "answered before durable"
        assert sum(counter.rounds) == 16 and len(counter.rounds) < 16
        print(f"16 acknowledgements in {len(counter.rounds)} write rounds: {counter.rounds}")
        assert (await node.leader.describe_offset("g", TP))[0] == 16
    finally:
        await node.stop()
