"""A share partition moves and fences with its topic partition (cluster mode, on the real runtime and
memory logs): a new leader loads under a newer leader epoch, which fences the previous leader's
writes; a leader that releases the topic partition drops its share partitions; a node that does not
lead the partition loads nothing."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from kcoord.coordinator.share.partition_state import AcknowledgeType
from kcoord.coordinator.share.state_records import ShareStateKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.plain_batch import encode_for_log
from kcoord.runtime.share_coordinator import ShareCoordinator, ShareStateTopicOf, new_state_shard
from kcoord.runtime.share_partition_leader import SharePartitionLeader
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.clock import SystemClock
from tests.runtime.test_share_partition_leader import CONFIG, TOPIC_ID, TP, Catalogue


@pytest.fixture
async def store() -> AsyncIterator[MemoryLogStore]:
    store = MemoryLogStore()
    await store.open()
    queue = await store.create("queue", 0)
    await queue.append(encode_for_log([(None, str(n).encode()) for n in range(10)], 0).data)
    yield store
    await store.close()


@pytest.fixture
async def state(store: MemoryLogStore) -> AsyncIterator[ShareCoordinator]:
    """The share coordinator both leaders reach (where the share partition's state lives)."""
    catalogue = Catalogue(store)
    coordinator = ShareCoordinator(
        ShareStateTopicOf(catalogue, catalogue.state_partitions, catalogue.create),
        SystemClock(),
        new_state_shard(CONFIG),
        num_partitions=2,
    )
    yield coordinator
    await coordinator.stop()


def leader_under(
    store: MemoryLogStore, state: ShareCoordinator, epochs: dict[str, int | None]
) -> SharePartitionLeader:
    """A node's leader; ``epochs["now"]`` is the epoch it leads the topic partition under (None: not)."""
    leader = SharePartitionLeader(
        CONFIG,
        state,
        lambda topic_id, partition: store.get("queue", partition) if topic_id == TOPIC_ID else None,
        SystemClock(),
        max_sessions=10,
        leader_epoch=lambda topic_id, partition: epochs["now"],
        missing_log_error=lambda topic_id, partition: ErrorCode.not_leader_or_follower,
    )
    leader.start()
    return leader


async def acquired(leader: SharePartitionLeader, member: str) -> list[tuple[int, int, int]]:
    await leader.ensure_loaded("g", TP)
    _, runs = await leader.acquire("g", member, TP, 100, 1 << 20)
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in runs]


async def test_a_new_leader_fences_the_previous_one_and_redelivers_what_it_held(
    store: MemoryLogStore, state: ShareCoordinator
) -> None:
    """The first leader (epoch 1) acquires everything and accepts 0-3; the next (epoch 2) loads the
    durable state, so 4-9 come again (as first deliveries: acquisitions are not written); the first
    leader's later acknowledgement is fenced (nothing written) and its stale copy dropped, and the
    stored state carries epoch 2."""
    first = leader_under(store, state, {"now": 1})
    second = leader_under(store, state, {"now": 2})
    try:
        assert await acquired(first, "a") == [(0, 9, 1)]
        assert await first.acknowledge("g", "a", TP, [(0, 3, (AcknowledgeType.ACCEPT,))]) == ErrorCode.none
        assert await acquired(second, "b") == [(4, 9, 1)]  # an acquisition is not written
        late = await first.acknowledge("g", "a", TP, [(4, 9, (AcknowledgeType.ACCEPT,))])
        assert late == ErrorCode.fenced_leader_epoch
        assert first.led_partitions("g") == [], "the fenced leader dropped its stale copy"
        stored = state.read_state(ShareStateKey("g", *TP))
        assert stored is not None and (stored.leader_epoch, stored.start_offset) == (2, 4)
    finally:
        await first.stop()
        await second.stop()


async def test_releasing_the_topic_partition_drops_its_share_partitions(
    store: MemoryLogStore, state: ShareCoordinator
) -> None:
    """After :meth:`drop_partition` the leader holds nothing of the partition and, no longer leading it,
    loads nothing (NOT_LEADER_OR_FOLLOWER); acknowledgements of what it held are refused."""
    epochs: dict[str, int | None] = {"now": 1}
    leader = leader_under(store, state, epochs)
    try:
        assert await acquired(leader, "a") == [(0, 9, 1)]
        leader.drop_partition(TP)
        epochs["now"] = None
        assert leader.led_partitions("g") == []
        refused = await leader.acknowledge("g", "a", TP, [(0, 9, (AcknowledgeType.ACCEPT,))])
        assert refused == ErrorCode.invalid_record_state
        with pytest.raises(KafkaError) as not_leader:
            await leader.ensure_loaded("g", TP)
        assert not_leader.value.code == ErrorCode.not_leader_or_follower
    finally:
        await leader.stop()


async def test_a_leader_on_another_topic_partition_keeps_its_share_partitions(
    store: MemoryLogStore, state: ShareCoordinator
) -> None:
    """Dropping one topic partition leaves the share partitions of the others alone."""
    leader = leader_under(store, state, {"now": 1})
    try:
        assert await acquired(leader, "a") == [(0, 9, 1)]
        leader.drop_partition((uuid.UUID(int=99), 0))
        assert leader.led_partitions("g") == [TP]
    finally:
        await leader.stop()
