"""The shared topic catalogue's table code against a real PostgreSQL: the migration that adopts an
existing database's topics, races between nodes, deletes that take the logs along, and the epochs
a recreated topic's partitions start from."""

from __future__ import annotations

import asyncio
import base64
import uuid

import asyncpg
import pytest

from kcoord.storage import LogConfig
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.catalogue import CatalogueRow, DeleteOutcome, GrowOutcome, TopicCatalogue
from kcoord.storage.postgres.committer import PartitionFencedError
from kcoord.storage.postgres.ownership import Ownership
from kcoord.storage.postgres.schema import MIGRATIONS
from tests.support.postgres import PostgresCluster

from .helpers import BatchBuilder

NOW_MS = 1_700_000_000_000


def _row(name: str, partitions: int = 2, **configs: str) -> CatalogueRow:
    return CatalogueRow(name, uuid.uuid4(), partitions, {k.replace("_", "."): v for k, v in configs.items()})


async def _partition_rows(store: PostgresLogStore, topic: str) -> list[tuple[int, int]]:
    rows = await store.pool.fetch(
        "SELECT p.partition_id, count(s.base_offset) AS segments FROM log_partitions p"
        " LEFT JOIN log_segments s USING (topic, partition_id) WHERE p.topic = $1"
        " GROUP BY p.partition_id ORDER BY p.partition_id",
        topic,
    )
    return [(row["partition_id"], row["segments"]) for row in rows]


async def test_the_migration_adopts_the_topics_an_older_database_holds(
    postgres_cluster: PostgresCluster,
) -> None:
    """A database migrated before the catalogue existed gets one catalogue row per topic found in
    its partition rows: the partition count, a random id Kafka would accept, and the offsets topic
    marked internal and compacted."""
    url = postgres_cluster.create_database()
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, description text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, description, sql in MIGRATIONS:
            if version > 4:
                break
            await connection.execute(sql)
            await connection.execute(
                "INSERT INTO schema_migrations (version, description) VALUES ($1, $2)", version, description
            )
        await connection.execute(
            "INSERT INTO log_partitions (topic, partition_id) VALUES ('orders', 0), ('orders', 1),"
            " ('orders', 2), ('__consumer_offsets', 0), ('__consumer_offsets', 1)"
        )
    finally:
        await connection.close()
    store = PostgresLogStore(url, LogConfig(), retention_check_interval_ms=0)
    await store.open()
    try:
        snapshot = await TopicCatalogue(store.pool).snapshot()
    finally:
        await store.close()
    by_name = {row.name: row for row in snapshot.topics}
    assert set(by_name) == {"orders", "__consumer_offsets"}
    assert (by_name["orders"].partitions, by_name["orders"].internal, dict(by_name["orders"].configs)) == (
        3,
        False,
        {},
    )
    offsets = by_name["__consumer_offsets"]
    assert (offsets.partitions, offsets.internal, dict(offsets.configs)) == (
        2,
        True,
        {"cleanup.policy": "compact"},
    )
    assert by_name["orders"].topic_id != offsets.topic_id
    for row in snapshot.topics:
        assert row.topic_id.int != 0
        assert not base64.urlsafe_b64encode(row.topic_id.bytes).decode().startswith("-")


async def test_two_nodes_creating_one_name_give_exactly_one_topic(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore],
) -> None:
    """Two nodes create the same name at once, ten times over: each time exactly one wins, the
    catalogue holds the winner's id and partition count, and the partition rows match it."""
    one, two = (TopicCatalogue(store.pool) for store in two_nodes)
    for attempt in range(10):
        name = f"raced-{attempt}"
        first, second = _row(name, 2), _row(name, 5)
        results = await asyncio.gather(one.create(first, NOW_MS), two.create(second, NOW_MS))
        assert sorted(results) == [False, True]
        winner = first if results[0] else second
        (stored,) = [row for row in (await one.snapshot()).topics if row.name == name]
        assert (stored.topic_id, stored.partitions) == (winner.topic_id, winner.partitions)
        assert await _partition_rows(two_nodes[0], name) == [(p, 1) for p in range(winner.partitions)]


async def test_every_change_bumps_the_version_and_a_refused_one_does_not(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore],
) -> None:
    """Create, grow, reconfigure and delete each move the version by one; a create of a taken name,
    a grow that does not grow, changes to an unknown topic, a config change its callback refuses
    and a delete of an internal topic change nothing."""
    catalogue = TopicCatalogue(two_nodes[0].pool)
    start = await catalogue.version()
    assert await catalogue.create(_row("t", 1, retention_ms="1000"), NOW_MS)
    assert not await catalogue.create(_row("t", 3), NOW_MS)
    assert await catalogue.add_partitions("t", 3, NOW_MS) == (GrowOutcome.GROWN, 3)
    assert await catalogue.add_partitions("t", 2, NOW_MS) == (GrowOutcome.NOT_GROWING, 3)
    assert await catalogue.add_partitions("nope", 4, NOW_MS) == (GrowOutcome.UNKNOWN, 0)
    assert await catalogue.alter_configs(
        "t", lambda current, _: {**current, "max.message.bytes": "2048"}
    ) == {
        "retention.ms": "1000",
        "max.message.bytes": "2048",
    }
    assert await catalogue.alter_configs("t", lambda current, _: {"max.message.bytes": "2048"}) is not None
    assert await catalogue.alter_configs("nope", lambda current, _: {}) is None

    def refuse(current: dict[str, str], internal: bool) -> dict[str, str]:
        raise ValueError("refused")

    with pytest.raises(ValueError):
        await catalogue.alter_configs("t", refuse)
    internal = CatalogueRow("__consumer_offsets", uuid.uuid4(), 1, {}, internal=True)
    assert await catalogue.create(internal, NOW_MS)
    assert (await catalogue.delete("__consumer_offsets"))[0] is DeleteOutcome.INTERNAL
    assert await catalogue.delete("nope") == (DeleteOutcome.UNKNOWN, None)
    assert await catalogue.version() == start + 5
    (stored,) = [row for row in (await catalogue.snapshot()).topics if row.name == "t"]
    assert (stored.partitions, dict(stored.configs)) == (3, {"max.message.bytes": "2048"})
    assert await _partition_rows(two_nodes[0], "t") == [(0, 1), (1, 1), (2, 1)]
    outcome, deleted = await catalogue.delete("t")
    assert outcome is DeleteOutcome.DELETED and deleted == stored
    assert await catalogue.version() == start + 6
    assert [row.name for row in (await catalogue.snapshot()).topics] == ["__consumer_offsets"]


async def test_a_delete_takes_the_logs_and_a_recreated_topic_starts_empty_past_old_epochs(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], make_batch: BatchBuilder
) -> None:
    """Deleting a topic removes its partition, segment and batch rows in the same transaction; the
    name created again starts with no batches, and the first claim of its partition gets an epoch
    above every epoch the old partition had, so a stale log of the old topic stays fenced."""
    store = two_nodes[0]
    catalogue, ownership = TopicCatalogue(store.pool), Ownership(store.pool)
    assert await ownership.register(1, "127.0.0.1", 9001, 60_000)
    assert await catalogue.create(_row("t", 1), NOW_MS)
    for _ in range(3):
        epoch = await ownership.claim(1, "t", 0)
    assert epoch == 3
    stale = await store.reopen("t", 0, epoch)
    await stale.append(make_batch([b"old"]))
    assert await store.pool.fetchval("SELECT count(*) FROM log_batches WHERE topic = 't'") == 1

    assert (await catalogue.delete("t"))[0] is DeleteOutcome.DELETED
    for table in ("log_partitions", "log_segments", "log_batches"):
        assert await store.pool.fetchval(f"SELECT count(*) FROM {table} WHERE topic = 't'") == 0
    assert await catalogue.create(_row("t", 1), NOW_MS)
    assert await ownership.claim(1, "t", 0) == 4
    fresh = await two_nodes[1].reopen("t", 0, 4)
    assert fresh.log_end_offset == 0
    with pytest.raises(PartitionFencedError):
        await stale.append(make_batch([b"stale"]))
    assert await store.pool.fetchval("SELECT count(*) FROM log_batches WHERE topic = 't'") == 0


async def test_logs_written_by_a_node_alone_are_adopted_once(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore],
) -> None:
    """A node serving the database alone writes logs and no catalogue rows; a cluster starting on
    that database catalogues them as the given rule says (one version bump), and a second call
    adopts nothing."""
    alone, _ = two_nodes
    for partition in range(3):
        await alone.create("solo", partition)
    await alone.create("__consumer_offsets", 0)
    table = TopicCatalogue(alone.pool)
    before = await table.version()
    asked: list[tuple[str, int]] = []

    def rule(name: str, partitions: int) -> CatalogueRow:
        asked.append((name, partitions))
        internal = name.startswith("__")
        return CatalogueRow(
            name, uuid.uuid4(), partitions, {"segment.bytes": "1048576"} if internal else {}, internal
        )

    assert await table.adopt_uncatalogued(rule) == {"solo": 3, "__consumer_offsets": 1}
    assert sorted(asked) == [("__consumer_offsets", 1), ("solo", 3)]
    snapshot = await table.snapshot()
    assert snapshot.version == before + 1
    by_name = {row.name: row for row in snapshot.topics}
    assert by_name["solo"].partitions == 3 and not by_name["solo"].internal
    assert by_name["__consumer_offsets"].internal
    assert by_name["__consumer_offsets"].configs == {"segment.bytes": "1048576"}
    assert await table.adopt_uncatalogued(rule) == {}
    assert await table.version() == before + 1
    assert not await table.create(_row("solo"), NOW_MS), "an adopted name is taken"


async def test_many_topics_grow_in_one_change(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore],
) -> None:
    """add_partitions_many grows every topic that grows in one transaction (one version step), with
    each new partition's row and first segment, and answers unknown and not-growing topics per name;
    when none grows the version does not move."""
    catalogue = TopicCatalogue(two_nodes[0].pool)
    for name, partitions in (("a", 1), ("b", 2), ("c", 4)):
        assert await catalogue.create(_row(name, partitions), NOW_MS)
    start = await catalogue.version()
    outcomes = await catalogue.add_partitions_many({"a": 3, "b": 5, "c": 4, "nope": 2}, NOW_MS)
    assert outcomes == {
        "a": (GrowOutcome.GROWN, 3),
        "b": (GrowOutcome.GROWN, 5),
        "c": (GrowOutcome.NOT_GROWING, 4),
        "nope": (GrowOutcome.UNKNOWN, 0),
    }
    assert await catalogue.version() == start + 1
    rows = {row.name: row.partitions for row in (await catalogue.snapshot()).topics}
    assert rows == {"a": 3, "b": 5, "c": 4}
    assert await _partition_rows(two_nodes[0], "a") == [(p, 1) for p in range(3)]
    assert await _partition_rows(two_nodes[0], "b") == [(p, 1) for p in range(5)]
    assert await catalogue.add_partitions_many({"a": 2, "nope": 9}, NOW_MS) == {
        "a": (GrowOutcome.NOT_GROWING, 3),
        "nope": (GrowOutcome.UNKNOWN, 0),
    }
    assert await catalogue.version() == start + 1


async def test_many_topics_are_created_in_one_change(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore],
) -> None:
    """create_many adds every free name in one transaction (one version step) with its partitions'
    rows and first segments, answers a taken name and a second use of a name in the same call False,
    and moves nothing when every name is taken."""
    catalogue = TopicCatalogue(two_nodes[0].pool)
    assert await catalogue.create(_row("taken", 1), NOW_MS)
    start = await catalogue.version()
    rows = [_row("a", 2, retention_ms="1000"), _row("taken", 3), _row("b", 1), _row("a", 5)]
    assert await catalogue.create_many(rows, NOW_MS) == {"a": True, "taken": False, "b": True}
    assert await catalogue.version() == start + 1
    stored = {row.name: row for row in (await catalogue.snapshot()).topics}
    assert (stored["a"].topic_id, stored["a"].partitions) == (rows[0].topic_id, 2)
    assert stored["a"].configs == {"retention.ms": "1000"}
    assert stored["taken"].partitions == 1
    assert await _partition_rows(two_nodes[0], "a") == [(0, 1), (1, 1)]
    assert await _partition_rows(two_nodes[0], "b") == [(0, 1)]
    assert await catalogue.create_many([_row("a"), _row("b")], NOW_MS) == {"a": False, "b": False}
    assert await catalogue.version() == start + 1
