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
from kcoord.coordinator.share.state_records import SHARE_STATE_TOPIC
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.plain_batch import encode_plain_batch
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

    def partition_log(self, name: str, partition: int) -> PartitionLog | None:
        return self.store.get(name, partition)

    def state_partitions(self) -> int | None:
        return 2 if self.store.get(SHARE_STATE_TOPIC, 0) is not None else None

    async def create(self, partitions: int, configs: object) -> None:
        for partition in range(partitions):
            await self.store.create(SHARE_STATE_TOPIC, partition)


@dataclass
class Node:
    state: ShareCoordinator
    leader: SharePartitionLeader

    async def stop(self) -> None:
        await self.leader.stop()
        await self.state.stop()


def start_node(store: MemoryLogStore) -> Node:
    catalogue = Catalogue(store)
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
    )
    leader.start()
    return Node(state, leader)


@pytest.fixture
async def store() -> AsyncIterator[MemoryLogStore]:
    store = MemoryLogStore()
    await store.open()
    queue = await store.create("queue", 0)
    await queue.append(encode_plain_batch([(None, str(n).encode()) for n in range(10)], 0))
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
