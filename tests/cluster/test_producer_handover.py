"""Idempotent producers across the nodes of a cluster, on a real PostgreSQL: two stores on one
database play two nodes. Producer ids never repeat between nodes, and a partition's producer state
follows it to its next owner (snapshot in the database + log tail), so a retry of a batch the old
owner stored is a duplicate there too."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kcoord.cluster.partition_transactions import AbortedTransaction
from kcoord.cluster.producer_handover import ProducerHandover
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.log import PostgresLog
from kcoord.storage.postgres.ownership import Ownership
from kcoord.storage.postgres.producer_ids import PostgresIdReservations
from kcoord.storage.postgres.producer_snapshots import PostgresProducerSnapshots

from .test_producer_snapshots import PID, batch
from .test_transaction_restore import marker, txn_batch

LEASE_MS = 60_000


def clustered(store: PostgresLogStore, data_dir: Path, block_size: int = 10) -> ProducerStateManager:
    manager = ProducerStateManager(data_dir, id_block_size=block_size, gated=True)
    manager.reserve_ids_from(PostgresIdReservations(store.pool))
    return manager


async def test_nodes_never_hand_out_the_same_producer_id(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], tmp_path: Path
) -> None:
    """Two nodes initialising producers at once, each over several blocks, get disjoint ids, and a
    node restarted on a fresh data directory continues past both."""
    one, two = two_nodes
    first, second = clustered(one, tmp_path / "one"), clustered(two, tmp_path / "two")
    issued = await asyncio.gather(*(m.init_producer() for _ in range(35) for m in (first, second)))
    ids = [pid for pid, epoch in issued]
    assert all(epoch == 0 for _, epoch in issued)
    assert len(set(ids)) == 70
    restarted = clustered(one, tmp_path / "again")
    later, _ = await restarted.init_producer()
    assert later > max(ids)
    assert not (tmp_path / "one" / "producer_ids").exists(), "a cluster node reserves in the database"


async def test_the_counter_starts_past_a_former_single_node_ids(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore],
) -> None:
    """A node that handed out ids alone before joining lifts the counter past them."""
    one, two = two_nodes
    assert await PostgresIdReservations(one.pool, floor=5000).reserve(100) == 5000
    assert await PostgresIdReservations(two.pool).reserve(100) == 5100
    assert await PostgresIdReservations(two.pool, floor=10).reserve(1) == 5200


async def test_producer_state_follows_the_partition_to_its_next_owner(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], tmp_path: Path
) -> None:
    """Node 1 writes batches (some before its last snapshot, some after) and loses the partition;
    node 2 claims it, refuses idempotent batches until the state is loaded, then answers a retry of
    node 1's last batch with its original offset, refuses a sequence gap, accepts the next batch,
    and node 1's late snapshot write is refused by the epoch."""
    one, two = two_nodes
    ownership = Ownership(one.pool)
    assert await ownership.register(1, "127.0.0.1", 9001, LEASE_MS)
    node_two = Ownership(two.pool)  # node 2's own process: its own incarnation
    assert await node_two.register(2, "127.0.0.1", 9002, LEASE_MS)
    await one.create("t", 0)
    producers_one = clustered(one, tmp_path / "one")
    handover_one = ProducerHandover(producers_one, PostgresProducerSnapshots(one.pool))
    log_one = await one.reopen("t", 0, await ownership.claim(1, "t", 0) or -1)
    await handover_one.acquire("t", 0, log_one)
    offsets = []
    for first_sequence in (0, 5, 10, 15):
        if first_sequence == 10:
            assert await handover_one.snapshot_all() == 1
        slot = producers_one.check_and_record("t", 0, PID, 0, first_sequence, 5)
        result = await log_one.append(batch(first_sequence))
        slot.complete(result.base_offset, result.log_append_time_ms)
        offsets.append(result.base_offset)

    await ownership.release(1, "t", 0)
    epoch_two = await node_two.claim(2, "t", 0)
    assert epoch_two is not None
    producers_two = clustered(two, tmp_path / "two")
    handover_two = ProducerHandover(producers_two, PostgresProducerSnapshots(two.pool))
    log_two = await two.reopen("t", 0, epoch_two)
    with pytest.raises(KafkaError) as loading:
        producers_two.check_and_record("t", 0, PID, 0, 15, 5)
    assert loading.value.code == ErrorCode.not_leader_or_follower
    await handover_two.acquire("t", 0, log_two)

    assert await producers_two.check_and_record("t", 0, PID, 0, 15, 5).original() == (offsets[3], -1)
    assert await producers_two.check_and_record("t", 0, PID, 0, 5, 5).original() == (offsets[1], -1)
    with pytest.raises(KafkaError) as gap:
        producers_two.check_and_record("t", 0, PID, 0, 25, 5)
    assert gap.value.code == ErrorCode.out_of_order_sequence_number
    assert not producers_two.check_and_record("t", 0, PID, 0, 20, 5).duplicate

    assert isinstance(log_one, PostgresLog)
    stale = await PostgresProducerSnapshots(one.pool).write("t", 0, log_one.owner_epoch, 0, b"{}")
    assert not stale, "a fenced node cannot overwrite its successor's snapshot"
    handover_one.release("t", 0)
    assert handover_one.serving() == [] and not producers_one.is_open("t", 0)
    assert await handover_two.snapshot_all() == 1


async def test_an_unreadable_snapshot_means_a_full_scan(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], tmp_path: Path
) -> None:
    """A snapshot row that does not decode is ignored: the state comes from the whole log."""
    one, _ = two_nodes
    ownership = Ownership(one.pool)
    assert await ownership.register(1, "127.0.0.1", 9001, LEASE_MS)
    await one.create("t", 0)
    epoch = await ownership.claim(1, "t", 0)
    assert epoch is not None
    log = await one.reopen("t", 0, epoch)
    stored = await log.append(batch(0))
    assert await PostgresProducerSnapshots(one.pool).write("t", 0, epoch, 1, b"not json")
    producers = clustered(one, tmp_path)
    await ProducerHandover(producers, PostgresProducerSnapshots(one.pool)).acquire("t", 0, log)
    assert await producers.check_and_record("t", 0, PID, 0, 0, 5).original() == (stored.base_offset, -1)


async def test_open_transactions_and_aborts_follow_the_partition(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], tmp_path: Path
) -> None:
    """Node 1 snapshots mid-way through transactional writes and loses the partition; node 2 rebuilds
    the open transaction (its LSO) and the aborted index from the snapshot row and the log tail."""
    one, two = two_nodes
    ownership, node_two = Ownership(one.pool), Ownership(two.pool)
    assert await ownership.register(1, "127.0.0.1", 9001, LEASE_MS)
    assert await node_two.register(2, "127.0.0.1", 9002, LEASE_MS)
    await one.create("t", 0)
    producers_one = clustered(one, tmp_path / "one")
    handover_one = ProducerHandover(producers_one, PostgresProducerSnapshots(one.pool))
    log_one = await one.reopen("t", 0, await ownership.claim(1, "t", 0) or -1)
    await handover_one.acquire("t", 0, log_one)
    await log_one.append(txn_batch(1, 0))  # 0-2, aborted below
    await log_one.append(txn_batch(2, 0))  # 3-5, still open at the handover
    assert await handover_one.snapshot_all() == 1
    await log_one.append(marker(1, committed=False))  # 6
    await ownership.release(1, "t", 0)
    handover_one.release("t", 0)

    epoch_two = await node_two.claim(2, "t", 0)
    assert epoch_two is not None
    producers_two = clustered(two, tmp_path / "two")
    handover_two = ProducerHandover(producers_two, PostgresProducerSnapshots(two.pool))
    await handover_two.acquire("t", 0, await two.reopen("t", 0, epoch_two))
    assert producers_two.last_stable_offset("t", 0, 7) == 3
    assert producers_two.aborted_between("t", 0, 0, 7) == [AbortedTransaction(1, 0, 6)]
