"""Nodes, leases and epoch fencing in the ``postgresql://`` engine: two stores on one database play
two nodes; a node whose partition was claimed by another can never write it again."""

from __future__ import annotations

import asyncio

import pytest

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.committer import PartitionFencedError
from kcoord.storage.postgres.ownership import LiveNode, Ownership

from .helpers import BatchBuilder
from .test_postgres_store import batches_of

LEASE_MS = 60_000


async def test_a_claim_fences_the_former_owner(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], make_batch: BatchBuilder
) -> None:
    """Once node 2 claims a partition, node 1's next append is refused inside the commit round with
    NOT_LEADER_OR_FOLLOWER, writes nothing, and the log stays closed; node 2 reads node 1's
    acknowledged batches and appends after them."""
    one, two = two_nodes
    ownership = Ownership(one.pool)
    assert await ownership.register(1, "127.0.0.1", 9001, LEASE_MS)
    node_two = Ownership(two.pool)  # node 2's own process: its own incarnation
    assert await node_two.register(2, "127.0.0.1", 9002, LEASE_MS)
    await one.create("t", 0)
    epoch_one = await ownership.claim(1, "t", 0)
    assert epoch_one == 1
    log_one = await one.reopen("t", 0, epoch_one)
    assert (await log_one.append(make_batch([b"a"]))).base_offset == 0

    assert await node_two.claim(2, "t", 0) is None  # node 1 is live and owns it
    await ownership.release(1, "t", 0)
    epoch_two = await node_two.claim(2, "t", 0)
    assert epoch_two == 2
    log_two = await two.reopen("t", 0, epoch_two)

    with pytest.raises(PartitionFencedError) as refused:
        await log_one.append(make_batch([b"stale"]))
    assert refused.value.code == ErrorCode.not_leader_or_follower
    assert one.committer.fenced == 1
    with pytest.raises(KafkaError):
        await log_one.append(make_batch([b"again"]))

    assert [base for base, _, _ in batches_of(await log_two.read_async(0, 1 << 20))] == [0]
    assert (await log_two.append(make_batch([b"b"]))).base_offset == 1
    fresh = await one.reopen("t", 0, epoch_two)
    assert [base for base, _, _ in batches_of(await fresh.read_async(0, 1 << 20))] == [0, 1]


async def test_a_fenced_round_does_not_hold_back_other_partitions(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], make_batch: BatchBuilder
) -> None:
    """Appends to a fenced and an owned partition in the same round: only the fenced one fails."""
    one, _ = two_nodes
    ownership = Ownership(one.pool)
    assert await ownership.register(1, "127.0.0.1", 9001, LEASE_MS)
    for partition in (0, 1):
        await one.create("t", partition)
    logs = [await one.reopen("t", p, await ownership.claim(1, "t", p) or 0) for p in (0, 1)]
    await ownership.claim(1, "t", 0)  # a second claim (a restarted incarnation) fences the first
    results = await asyncio.gather(*(log.append(make_batch([b"x"])) for log in logs), return_exceptions=True)
    assert isinstance(results[0], PartitionFencedError)
    assert not isinstance(results[1], BaseException) and results[1].base_offset == 0


async def test_leases_lapse_and_free_the_partitions(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], make_batch: BatchBuilder
) -> None:
    """A node whose lease lapses leaves the live list, cannot renew, and its partitions become
    claimable by a survivor; a clean deregistration frees them at once."""
    one, two = two_nodes
    ownership = Ownership(one.pool)
    assert await ownership.register(1, "127.0.0.1", 9001, 300)
    assert await ownership.register(2, "127.0.0.1", 9002, LEASE_MS)
    assert not await ownership.register(2, "127.0.0.1", 9003, LEASE_MS)  # id held by a live node
    await one.create("t", 0)
    await two.create("t", 1)
    assert await ownership.claim(1, "t", 0) == 1
    assert await ownership.claim(2, "t", 1) == 1
    assert [node.node_id for node in await ownership.live_nodes()] == [1, 2]
    assert await ownership.claim(2, "t", 0) is None

    await asyncio.sleep(0.6)
    assert await ownership.live_nodes() == [LiveNode(2, "127.0.0.1", 9002)]
    assert not await ownership.renew(1, LEASE_MS)
    assert await ownership.claim(1, "t", 0) is None  # a lapsed node claims nothing
    assert await ownership.claim(2, "t", 0) == 2

    await ownership.deregister(2)
    assert [(o.partition, o.node_id, o.epoch) for o in await ownership.owners()] == [
        (0, None, 2),
        (1, None, 1),
    ]
    assert await ownership.register(1, "127.0.0.1", 9001, LEASE_MS)
    assert await ownership.claim(1, "t", 1) == 2


async def test_structural_changes_are_fenced_too(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], make_batch: BatchBuilder
) -> None:
    """A former owner's truncation (what recovery after a failed round does) is refused before it
    deletes anything, so the new owner's batches stay."""
    one, two = two_nodes
    ownership = Ownership(one.pool)
    assert await ownership.register(1, "127.0.0.1", 9001, LEASE_MS)
    assert await ownership.register(2, "127.0.0.1", 9002, LEASE_MS)
    await one.create("t", 0)
    log_one = await one.reopen("t", 0, await ownership.claim(1, "t", 0) or 0)
    await log_one.append(make_batch([b"a"]))
    await ownership.release(1, "t", 0)
    log_two = await two.reopen("t", 0, await ownership.claim(2, "t", 0) or 0)
    await log_two.append(make_batch([b"b"]))

    with pytest.raises(PartitionFencedError):
        await log_one.truncate_to(0)
    fresh = await two.reopen("t", 0, 2)
    assert [base for base, _, _ in batches_of(await fresh.read_async(0, 1 << 20))] == [0, 1]


async def test_a_taken_over_incarnation_can_do_nothing_as_the_node_id(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore],
) -> None:
    """Once another incarnation registered id 1 (the first's lease had lapsed), the first cannot renew,
    claim, release or deregister as id 1, and :meth:`Ownership.holder` names the new incarnation."""
    one, two = two_nodes
    old, new = Ownership(one.pool), Ownership(two.pool)
    await one.create("t", 0)
    assert await old.register(1, "127.0.0.1", 9001, 300)
    await asyncio.sleep(0.4)
    assert await new.register(1, "127.0.0.1", 9002, LEASE_MS)
    assert await new.claim(1, "t", 0) == 1
    holder = await old.holder(1)
    assert holder is not None and holder.live and holder.incarnation == new.incarnation
    assert not await old.renew(1, LEASE_MS)
    assert await old.claim(1, "t", 0) is None
    await old.release(1, "t", 0)
    assert not await old.deregister(1)
    assert [(o.node_id, o.epoch) for o in await new.owners()] == [(1, 1)]
    assert await new.renew(1, LEASE_MS)
    assert await new.deregister(1)
    assert await new.holder(1) is None
