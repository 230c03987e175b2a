"""A ``postgresql://`` store's hold on its database: one node alone holds it exclusively, nodes of a
cluster share it, a refused store writes nothing, and a lost session fences writes until the lock is
taken again, or for good when another process held the database in between."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage import LogConfig
from kcoord.storage.holding import StoreHeldError
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres import hold as hold_module
from kcoord.storage.postgres.hold import HOLD_KEY, HoldMode
from tests.support.postgres import PostgresCluster

from .helpers import build_batch

EXCLUSIVE, SHARED = HoldMode.EXCLUSIVE, HoldMode.SHARED
SINGLE = "a single kcoord node"
CLUSTER = "a kcoord cluster"


@pytest.fixture
async def database(postgres_cluster: PostgresCluster) -> AsyncIterator[str]:
    yield postgres_cluster.create_database()


def store_on(url: str, mode: HoldMode) -> PostgresLogStore:
    return PostgresLogStore(
        url, LogConfig(), retention_check_interval_ms=0, log_cleaner_backoff_ms=0, hold=mode
    )


async def tables(url: str) -> set[str]:
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    finally:
        await connection.close()
    return {row["tablename"] for row in rows}


async def end_hold_sessions(url: str, application: str) -> int:
    """Terminate the database's sessions named ``application`` (a store's hold); how many."""
    connection = await asyncpg.connect(url)
    try:
        ended: int = await connection.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = $1",
            application,
        )
    finally:
        await connection.close()
    return ended


async def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` every 20 ms for up to 15 s."""
    deadline = asyncio.get_running_loop().time() + 15.0
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.02)


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        (EXCLUSIVE, EXCLUSIVE, f"held by {SINGLE} (connected from 127.0.0.1): this node cannot use it alone"),
        (EXCLUSIVE, SHARED, f"held by {SINGLE} (connected from 127.0.0.1): this node cannot join it"),
        (SHARED, EXCLUSIVE, f"held by {CLUSTER} (connected from 127.0.0.1): this node cannot use it alone"),
    ],
    ids=["single-then-single", "single-then-cluster", "cluster-then-single"],
)
async def test_a_store_refuses_a_database_another_holds_in_a_conflicting_mode(
    database: str, first: HoldMode, second: HoldMode, message: str
) -> None:
    """The second store's open raises StoreHeldError saying who holds the database, without the user
    or a password; the first keeps working."""
    holder = store_on(database, first)
    await holder.open()
    try:
        refused = store_on(database, second)
        with pytest.raises(StoreHeldError) as caught:
            await refused.open()
        assert message in str(caught.value)
        assert "postgres@" not in str(caught.value)
        log = await holder.create("t", 0)
        assert (await log.append(build_batch([b"v"]))).base_offset == 0
    finally:
        await holder.close()


async def test_cluster_nodes_share_the_database(database: str) -> None:
    """Two stores holding shared (two nodes of a cluster) both open."""
    stores = [store_on(database, SHARED), store_on(database, SHARED)]
    for store in stores:
        await store.open()
    for store in stores:
        await store.close()


async def test_a_refused_store_writes_nothing_to_a_fresh_database(database: str) -> None:
    """With the lock held elsewhere, the refused store never migrates: the database stays empty."""
    other = await asyncpg.connect(database)
    try:
        assert await other.fetchval("SELECT pg_try_advisory_lock($1)", HOLD_KEY)
        with pytest.raises(StoreHeldError):
            await store_on(database, EXCLUSIVE).open()
        assert await tables(database) == set()
    finally:
        await other.close()
    store = store_on(database, EXCLUSIVE)
    await store.open()
    await store.close()
    assert "log_partitions" in await tables(database)


async def test_a_lost_session_fences_writes_until_the_lock_is_taken_again(database: str) -> None:
    """The hold's session is terminated: appends fail with KAFKA_STORAGE_ERROR while the store is
    fenced, and succeed again once the lock is back, without reopening the store."""
    store = store_on(database, EXCLUSIVE)
    await store.open()
    try:
        log = await store.create("t", 0)
        await log.append(build_batch([b"v"]))
        assert await end_hold_sessions(database, "kcoord single node") == 1
        await wait_for(lambda: store.hold.fenced, "the store fenced itself")
        with pytest.raises(KafkaError) as failed:
            await log.append(build_batch([b"v"]))
        assert failed.value.code == ErrorCode.kafka_storage_error
        await wait_for(lambda: not store.hold.fenced, "the lock taken again")
        for _ in range(20):
            try:
                await log.append(build_batch([b"v"]))
                break
            except KafkaError as exc:
                assert exc.code == ErrorCode.kafka_storage_error
                await asyncio.sleep(0.1)
        assert store.hold.lost is None
    finally:
        await store.close()


@pytest.mark.parametrize("intruder_stays", [True, False], ids=["still-held", "held-and-left"])
async def test_a_store_whose_database_was_taken_meanwhile_gives_up(
    database: str, monkeypatch: pytest.MonkeyPatch, intruder_stays: bool
) -> None:
    """Another single node takes the database while this store's session is gone: the store never
    lifts its fence, whether the other still holds the lock or has left (its token shows it was there),
    and tells its owner why."""
    monkeypatch.setattr(hold_module, "PROBE_INTERVAL_S", 2.0)
    store = store_on(database, EXCLUSIVE)
    reasons: list[str] = []
    store.hold.on_lost = reasons.append
    await store.open()
    intruder: PostgresLogStore | None = store_on(database, EXCLUSIVE)
    try:
        log = await store.create("t", 0)
        await end_hold_sessions(database, "kcoord single node")
        await wait_for(lambda: store.hold.fenced, "the store fenced itself")
        assert intruder is not None
        await intruder.open()
        if not intruder_stays:
            await intruder.close()
            intruder = None
        await wait_for(lambda: bool(reasons), "the store gave up")
        expected = "is held by a single kcoord node" if intruder_stays else "was held by another process"
        assert expected in reasons[0] and store.hold.fenced
        with pytest.raises(KafkaError) as failed:
            await log.append(build_batch([b"v"]))
        assert failed.value.code == ErrorCode.kafka_storage_error
    finally:
        if intruder is not None:
            await intruder.close()
        await store.close()
