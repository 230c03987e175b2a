"""Leader epochs of a cluster against a real PostgreSQL: each claim starts a new epoch where the log
ends, stamps it on what the new owner appends, records where it starts, and OffsetForLeaderEpoch's
end offsets come from those records."""

from __future__ import annotations

from kcoord.cluster.leader_epochs import EpochEnd, RecordedEpochs, end_offset_for
from kcoord.cluster.membership import ClusterMembership, LeaseSettings, LogOnlyHost, MembershipDirectory
from kcoord.protocol.record_batch import iter_batches
from kcoord.storage import LogConfig
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.hold import HoldMode
from kcoord.storage.postgres.ownership import EpochStart, Ownership
from tests.storage.helpers import build_batch
from tests.support.postgres import PostgresCluster

LEASE = LeaseSettings(lease_ms=60_000, renew_ms=1000)


def _member(store: PostgresLogStore, node_id: int) -> ClusterMembership:
    host = LogOnlyHost()
    return ClusterMembership(
        Ownership(store.pool),
        store,
        node_id,
        lambda: ("127.0.0.1", 9000 + node_id),
        lambda topic: host,
        lambda: [("t", 0)],
        LEASE,
    )


async def test_each_claim_records_where_its_epoch_starts(postgres_cluster: PostgresCluster) -> None:
    """Node 1 claims (epoch 1 from offset 0) and appends three batches stamped 1; node 2 takes over
    (epoch 2 from offset 3) and stamps 2; epoch 1 then ends at 3, epoch 2 at the log end."""
    url = postgres_cluster.create_database()
    stores = [
        PostgresLogStore(url, LogConfig(), retention_check_interval_ms=0, hold=HoldMode.SHARED)
        for _ in range(2)
    ]
    for store in stores:
        await store.open()
    await stores[0].create("t", 0)
    one, two = _member(stores[0], 1), _member(stores[1], 2)
    try:
        await one.start()
        assert one.owned() == {("t", 0): 1}
        assert MembershipDirectory(one, lambda group: 0).leader_epoch("t", 0) == 1
        first = stores[0].get("t", 0)
        assert first is not None and first.leader_epoch == 1
        for value in (b"a", b"b", b"c"):
            await first.append(build_batch([value]))
        await one.stop()

        await two.start()
        assert two.owned() == {("t", 0): 2}
        second = stores[1].get("t", 0)
        assert second is not None and second.leader_epoch == 2
        await second.append(build_batch([b"d"]))
        stored = await second.read_async(0, 1 << 20)
        stamped = [header.partition_leader_epoch for _, header in iter_batches(stored)]
        assert stamped == [1, 1, 1, 2]

        history = RecordedEpochs()
        assert await history.around("t", 0, 1, 2) == (None, None), "alone: nothing recorded is read"
        history.ownership = Ownership(stores[1].pool)
        below, above = await history.around("t", 0, 1, 2)
        assert (below, above) == (EpochStart(1, 0), EpochStart(2, 3))
        assert end_offset_for(1, second.leader_epoch, second.log_end_offset, below, above) == EpochEnd(1, 3)
        assert end_offset_for(2, second.leader_epoch, second.log_end_offset, None, None) == EpochEnd(2, 4)
        assert await history.around("t", 0, 0, 2) == (None, EpochStart(1, 0))
    finally:
        await two.stop()
        for store in stores:
            await store.close()
