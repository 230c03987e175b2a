"""``__share_group_state`` in a cluster: the share coordinator serves a state partition only while the
membership has handed it to this node (acquire) and its lease holds, and a node that takes the
partition over replays what the previous owner wrote, as ``__consumer_offsets`` partitions move."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kcoord.coordinator.share.state_records import SHARE_STATE_TOPIC, ShareStateKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.share_coordinator import ShareCoordinator, ShareStateTopicOf, new_state_shard
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.clock import SystemClock
from tests.runtime.test_share_partition_leader import CONFIG, TP, Catalogue

KEY = ShareStateKey("g", *TP)


@pytest.fixture
async def store() -> AsyncIterator[MemoryLogStore]:
    store = MemoryLogStore()
    await store.open()
    yield store
    await store.close()


def cluster_node(store: MemoryLogStore, serving: list[bool]) -> ShareCoordinator:
    catalogue = Catalogue(store)
    return ShareCoordinator(
        ShareStateTopicOf(catalogue, catalogue.state_partitions, catalogue.create),
        SystemClock(),
        new_state_shard(CONFIG),
        num_partitions=2,
        owned_only=True,
        serving=lambda: serving[0],
    )


def refusal(state: ShareCoordinator) -> ErrorCode:
    try:
        state.read_state(KEY)
    except KafkaError as exc:
        return exc.code
    return ErrorCode.none


async def claim(state: ShareCoordinator, store: MemoryLogStore) -> None:
    """The membership hands this node the key's partition; returns once it has loaded."""
    partition = state.partition_for(KEY.coordinator_key)
    partition_log = store.get(SHARE_STATE_TOPIC, partition)
    assert partition_log is not None
    await state.acquire(partition, partition_log)
    for _ in range(1000):
        if refusal(state) != ErrorCode.coordinator_load_in_progress:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the claimed partition never loaded")


async def test_a_state_partition_is_served_only_while_owned_and_moves_with_its_state(
    store: MemoryLogStore,
) -> None:
    """Before the claim and after the release the key is NOT_COORDINATOR (also while the lease may have
    lapsed); once claimed it is read and written, and the next owner reads what the first wrote."""
    serving = [True]
    first = cluster_node(store, serving)
    second = cluster_node(store, [True])
    try:
        await first.ensure_started()
        assert store.get(SHARE_STATE_TOPIC, 1) is not None, "the topic is made, no partition claimed"
        assert refusal(first) == ErrorCode.not_coordinator
        await claim(first, store)
        assert first.read_state(KEY) is None
        assert await first.initialize_state(KEY, 5) == ErrorCode.none
        stored = first.read_state(KEY)
        assert stored is not None and stored.start_offset == 5
        serving[0] = False
        assert refusal(first) == ErrorCode.not_coordinator
        serving[0] = True
        await first.release(first.partition_for(KEY.coordinator_key))
        assert refusal(first) == ErrorCode.not_coordinator
        with pytest.raises(KafkaError) as fenced:
            await first.initialize_state(KEY, 9)
        assert fenced.value.code == ErrorCode.not_coordinator

        await claim(second, store)
        moved = second.read_state(KEY)
        assert moved is not None and (moved.start_offset, moved.state_epoch) == (5, stored.state_epoch)
    finally:
        await first.stop()
        await second.stop()


async def test_only_the_owner_prunes_a_state_partition_and_the_next_owner_loads_what_is_left(
    store: MemoryLogStore,
) -> None:
    """In a cluster the owner prunes its state partition; while its lease may have lapsed, or after
    the partition was released, it prunes nothing; the next owner loads the same state from the
    shorter log."""
    serving = [True]
    first = cluster_node(store, serving)
    second = cluster_node(store, [True])
    partition = first.partition_for(KEY.coordinator_key)
    try:
        await first.ensure_started()
        await claim(first, store)
        for start in range(12):
            assert await first.initialize_state(KEY, start) == ErrorCode.none
        stored = first.read_state(KEY)
        serving[0] = False
        assert await first.prune_state_log() == 0
        serving[0] = True
        assert await first.prune_state_log() > 0
        state_log = store.get(SHARE_STATE_TOPIC, partition)
        assert state_log is not None and state_log.log_start_offset == state_log.log_end_offset - 1
        await first.release(partition)
        assert await first.prune_state_log() == 0
        await claim(second, store)
        assert second.read_state(KEY) == stored
    finally:
        await first.stop()
        await second.stop()
