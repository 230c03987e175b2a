"""The share state router: a key whose ``__share_group_state`` partition this node owns is served by
the local share coordinator; one whose owner cannot be reached answers COORDINATOR_NOT_AVAILABLE (a
retriable error for the share partition's fetch), and the next call connects afresh."""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator

import pytest

from kcoord.cluster.share_state_routing import RoutingShareState
from kcoord.coordinator.share.partition_state import StateBatch
from kcoord.coordinator.share.partitions import StateWrite
from kcoord.coordinator.share.state_records import ShareStateKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.share_coordinator import ShareCoordinator, ShareStateTopicOf, new_state_shard
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.clock import SystemClock
from tests.runtime.test_share_partition_leader import CONFIG, Catalogue

KEY = ShareStateKey("g", uuid.UUID(int=5), 0)
WRITE = StateWrite(KEY, 0, 2, (StateBatch(2, 3, 2, 1),), 2)


@pytest.fixture
async def local() -> AsyncIterator[ShareCoordinator]:
    store = MemoryLogStore()
    await store.open()
    catalogue = Catalogue(store)
    state = ShareCoordinator(
        ShareStateTopicOf(catalogue, catalogue.state_partitions, catalogue.create),
        SystemClock(),
        new_state_shard(CONFIG),
        num_partitions=2,
    )
    yield state
    await state.stop()
    await store.close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_state_partition_owned_here_is_served_locally(local: ShareCoordinator) -> None:
    """With no other owner the write and the leader's read go to the local share coordinator."""
    router = RoutingShareState(local, lambda topic, partition: None)
    assert await router.write_state(WRITE, 4) == ErrorCode.none
    stored = await router.read_for_leader(KEY, 4)
    assert stored is not None and (stored.start_offset, stored.leader_epoch) == (2, 4)


async def test_an_unreachable_owner_is_coordinator_not_available(local: ShareCoordinator) -> None:
    """A refused connection answers COORDINATOR_NOT_AVAILABLE to the write and the read; nothing is
    written here, and each call tries the owner again."""
    port = closed_port()
    asked: list[tuple[str, int]] = []

    def owner_of(topic: str, partition: int) -> tuple[str, int]:
        asked.append((topic, partition))
        return "127.0.0.1", port

    router = RoutingShareState(local, owner_of)
    try:
        assert await router.write_state(WRITE, 4) == ErrorCode.coordinator_not_available
        with pytest.raises(KafkaError) as unreachable:
            await router.read_for_leader(KEY, 4)
        assert unreachable.value.code == ErrorCode.coordinator_not_available
        assert len(asked) == 2
        assert local.read_state(KEY) is None
    finally:
        router.close()
