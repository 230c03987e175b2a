"""A cluster node's lease against a real PostgreSQL: it claims its share, and when it cannot renew
(the database is down) it stops serving and drops its partitions at its own monotonic deadline,
before the database could let another node claim them."""

from __future__ import annotations

import asyncio
import time

from kcoord.cluster.membership import ClusterMembership, LeaseSettings
from kcoord.storage import LogConfig
from kcoord.storage.api import PartitionLog
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.ownership import Ownership
from tests.support.postgres import PostgresCluster

LEASE_MS, RENEW_MS = 2000, 250


class RecordingHost:
    """Keeps what the membership hands it, as the group coordinator would serve it."""

    def __init__(self) -> None:
        self.serving: set[int] = set()
        self.released_at: dict[int, float] = {}

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None:
        self.serving.add(partition)

    async def release(self, partition: int) -> None:
        self.serving.discard(partition)
        self.released_at[partition] = time.monotonic()


async def test_a_node_that_cannot_renew_steps_down_before_its_lease_lapses(
    postgres_cluster: PostgresCluster,
) -> None:
    """Database stopped: renewals fail, serving() turns False and every partition is released no
    later than (last renewal sent + lease - renew interval), i.e. before the lease on the database
    clock (which started later) can lapse; once the database is back the node serves again."""
    store = PostgresLogStore(postgres_cluster.create_database(), LogConfig(), retention_check_interval_ms=0)
    await store.open()
    for partition in range(4):
        await store.create("t", partition)
    host = RecordingHost()
    membership = ClusterMembership(
        Ownership(store.pool),
        store,
        7,
        lambda: ("127.0.0.1", 9007),
        lambda topic: host,
        lambda: [("t", p) for p in range(4)],
        LeaseSettings(lease_ms=LEASE_MS, renew_ms=RENEW_MS),
    )
    await membership.start()
    try:
        assert membership.serving() and host.serving == {0, 1, 2, 3}
        assert set(membership.owned()) == {("t", p) for p in range(4)}
        last_renewal = time.monotonic()
        await membership.tick()
        await asyncio.to_thread(postgres_cluster.stop_server)
        try:
            stopped_at = time.monotonic()
            while membership.serving() and time.monotonic() - stopped_at < 10:
                await membership.tick()
                await asyncio.sleep(RENEW_MS / 1000)
            assert not membership.serving()
            await membership.tick()
            assert host.serving == set()
            assert max(host.released_at.values()) - last_renewal < (LEASE_MS + RENEW_MS) / 1000
        finally:
            await asyncio.to_thread(postgres_cluster.start_server)
        deadline = time.monotonic() + 30
        while host.serving != {0, 1, 2, 3} and time.monotonic() < deadline:
            await membership.tick()
            await asyncio.sleep(RENEW_MS / 1000)
        assert membership.serving() and host.serving == {0, 1, 2, 3}
    finally:
        await membership.stop()
        await store.close()
