"""One node id, one process, against a real PostgreSQL: a second process with the id is refused while
the first renews; a process whose id was taken over while it was paused cannot renew, claim, release
or deregister as that id, steps down and says so; it never takes the id back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kcoord.cluster.membership import ClusterMembership, LeaseSettings, LogOnlyHost, NodeIdInUseError
from kcoord.storage import LogConfig
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.hold import HoldMode
from kcoord.storage.postgres.ownership import Ownership
from tests.support.postgres import PostgresCluster

LEASE = LeaseSettings(lease_ms=1000, renew_ms=150, register_timeout_ms=10_000)
PARTITIONS = [("t", p) for p in range(4)]


@pytest.fixture
async def stores(
    postgres_cluster: PostgresCluster,
) -> AsyncIterator[tuple[PostgresLogStore, PostgresLogStore]]:
    """Two processes' stores (cluster mode) on one database holding topic ``t``."""
    url = postgres_cluster.create_database()
    pair = [
        PostgresLogStore(url, LogConfig(), retention_check_interval_ms=0, hold=HoldMode.SHARED)
        for _ in range(2)
    ]
    for store in pair:
        await store.open()
    for partition in range(len(PARTITIONS)):
        await pair[0].create("t", partition)
    try:
        yield pair[0], pair[1]
    finally:
        for store in pair:
            await store.close()


def member(store: PostgresLogStore, node_id: int = 1) -> ClusterMembership:
    return ClusterMembership(
        Ownership(store.pool),
        store,
        node_id,
        lambda: ("127.0.0.1", 9001),
        lambda topic: LogOnlyHost(),
        lambda: PARTITIONS,
        LEASE,
    )


async def recorded_epochs(store: PostgresLogStore) -> dict[int, tuple[int | None, int]]:
    """Partition -> (owner node, owner epoch) as the database records them."""
    owners = await Ownership(store.pool).owners()
    return {owner.partition: (owner.node_id, owner.epoch) for owner in owners}


async def test_a_second_process_with_a_live_node_id_is_refused(
    stores: tuple[PostgresLogStore, PostgresLogStore],
) -> None:
    """While the first process renews, the second's start raises NodeIdInUseError within a few
    renewals, and nothing the first owns moves."""
    first, second = member(stores[0]), member(stores[1])
    await first.start()
    try:
        before = await recorded_epochs(stores[0])
        with pytest.raises(NodeIdInUseError, match="node id 1 is held by another live kcoord process"):
            await asyncio.wait_for(second.start(), 5)
        assert await recorded_epochs(stores[0]) == before
        assert first.serving() and set(first.owned()) == set(PARTITIONS)
    finally:
        await first.stop()


async def test_a_process_whose_id_was_taken_over_steps_down_and_never_takes_it_back(
    stores: tuple[PostgresLogStore, PostgresLogStore],
) -> None:
    """The first process stops renewing (paused) past its lease; the second registers the id and
    claims everything. The first's next renewal finds the other incarnation: it steps down, reports
    why, and later renewals, its stop and deregistration move no epoch and leave the second registered."""
    first, second = member(stores[0]), member(stores[1])
    reasons: list[str] = []
    first.on_displaced = reasons.append
    await first.start()
    assert first._task is not None
    first._task.cancel()  # as if paused (SIGSTOP): no renewal from here on
    await second.start()  # waits for the first's lease to lapse, then registers
    try:
        taken = await recorded_epochs(stores[1])
        assert {node for node, _ in taken.values()} == {1} and set(second.owned()) == set(PARTITIONS)
        for _ in range(3):
            await first.tick()
        assert first.displaced is not None and reasons == [first.displaced]
        assert "node id 1 was taken over by another kcoord process" in reasons[0]
        assert not first.serving() and first.owned() == {}
        await first.stop()
        await second.tick()
        assert await recorded_epochs(stores[1]) == taken
        holder = await Ownership(stores[1].pool).holder(1)
        assert holder is not None and holder.live and str(holder.incarnation) == second.incarnation
        assert second.serving() and set(second.owned()) == set(PARTITIONS)
    finally:
        await second.stop()
