"""Two topic managers in cluster mode over one real PostgreSQL play two nodes: each change is
committed in the shared catalogue, the other node applies it on its next refresh (listeners told,
logs it holds reconfigured or closed), and races between them have exactly one winner."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kcoord.cluster.catalogue import diff
from kcoord.cluster.shared_catalogue import SharedCatalogue
from kcoord.cluster.topic_manager import CATALOGUE_FILE, TopicChange, TopicEvent, TopicInfo, TopicManager
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage import LogConfig
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.catalogue import TopicCatalogue
from kcoord.storage.postgres.hold import HoldMode
from tests.apis.broker.topic_app import make_settings
from tests.support.postgres import PostgresCluster


class Node:
    """One node's store, catalogue view, what its listeners heard, and what it counted as applied."""

    def __init__(self, url: str, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.store = PostgresLogStore(url, LogConfig(), retention_check_interval_ms=0, hold=HoldMode.SHARED)
        self.applied: list[str] = []
        self.shared = SharedCatalogue(self.store, self)
        self.topics = TopicManager(self.store, make_settings(), self.shared)
        self.events: list[tuple[TopicChange, str, int]] = []
        self.topics.add_listener(self._heard)

    def _heard(self, event: TopicEvent) -> None:
        self.events.append((event.change, event.topic.name, event.topic.partitions))

    def catalogue_change_applied(self, change: str) -> None:
        self.applied.append(change)


@pytest.fixture
async def nodes(postgres_cluster: PostgresCluster, tmp_path: Path) -> AsyncIterator[tuple[Node, Node]]:
    url = postgres_cluster.create_database()
    pair = (Node(url, tmp_path / "a"), Node(url, tmp_path / "b"))
    for node in pair:
        await node.store.open()
        await node.topics.load()
    try:
        yield pair
    finally:
        for node in pair:
            await node.store.close()


async def test_a_topic_created_on_one_node_appears_on_the_other_with_its_id_and_configs(
    nodes: tuple[Node, Node],
) -> None:
    """B learns A's topic (same random id, partitions and overrides) on its next refresh, its
    listeners hear CREATED, and it counts the change as applied from another node; no node writes
    a topics.json."""
    a, b = nodes
    created = await a.topics.create("orders", 3, configs={"retention.ms": "60000"})
    assert a.events == [(TopicChange.CREATED, "orders", 3)] and a.applied == []
    assert b.topics.get("orders") is None
    await b.topics.refresh()
    assert b.topics.get("orders") == created
    assert b.events == [(TopicChange.CREATED, "orders", 3)]
    assert b.applied == ["created"]
    assert not (a.data_dir / CATALOGUE_FILE).exists()


async def test_config_changes_reach_the_logs_the_other_node_holds(nodes: tuple[Node, Node]) -> None:
    """A config altered on A is in B's view after a refresh and in the config of the log B holds
    (as the partition's owner would); listeners hear nothing for a config change."""
    a, b = nodes
    await a.topics.create("t", 1)
    await b.topics.refresh()
    held = await b.store.reopen("t", 0, 0)
    await a.topics.alter_configs("t", lambda _: {"retention.ms": "1234", "max.message.bytes": "2048"})
    await b.topics.refresh()
    info = b.topics.get("t")
    assert info is not None and b.topics.max_message_bytes(info) == 2048
    assert held.config.retention_ms == 1234
    assert b.applied == ["created", "configs_altered"]
    assert b.events == [(TopicChange.CREATED, "t", 1)]


async def test_growth_deletion_and_recreation_follow_on_the_other_node(nodes: tuple[Node, Node]) -> None:
    """Partitions added on A reach B as PARTITIONS_ADDED; a delete on B closes A's copy of the log and
    tells A's listeners; the name created again on B has a new id, which A sees as a deletion of the
    old topic then a creation of the new one."""
    a, b = nodes
    first = await a.topics.create("t", 1)
    await a.topics.add_partitions("t", 3)
    await b.topics.refresh()
    assert b.events == [(TopicChange.CREATED, "t", 3)]
    held = await a.store.reopen("t", 2, 0)
    assert a.store.get("t", 2) is held

    deleted = await b.topics.delete("t")
    assert deleted.topic_id == first.topic_id
    recreated = await b.topics.create("t", 2)
    assert recreated.topic_id != first.topic_id
    await a.topics.refresh()
    assert a.topics.get("t") == recreated
    assert a.topics.get_by_id(first.topic_id) is None
    assert a.store.get("t", 2) is None
    assert a.events[-2:] == [(TopicChange.DELETED, "t", 3), (TopicChange.CREATED, "t", 2)]
    assert a.applied == ["deleted", "created"]


async def test_changes_to_a_topic_another_node_deleted_are_refused(nodes: tuple[Node, Node]) -> None:
    """A node whose view is stale is answered by the database: altering or growing a topic deleted
    elsewhere is UNKNOWN_TOPIC_OR_PARTITION, and its view catches up at once."""
    a, b = nodes
    await a.topics.create("t", 1)
    await b.topics.refresh()
    await a.topics.delete("t")
    for change in (
        b.topics.alter_configs("t", lambda _: {"retention.ms": "5"}),
        b.topics.add_partitions("t", 4),
    ):
        with pytest.raises(KafkaError) as refused:
            await change
        assert refused.value.code == ErrorCode.unknown_topic_or_partition
    assert b.topics.get("t") is None
    with pytest.raises(KafkaError) as refused:
        await b.topics.delete("t")
    assert refused.value.code == ErrorCode.unknown_topic_or_partition


async def test_a_create_race_between_nodes_has_one_winner(nodes: tuple[Node, Node]) -> None:
    """Both nodes create one name at once: one succeeds, the other gets TOPIC_ALREADY_EXISTS, and
    both views hold the winner's topic."""
    a, b = nodes
    results = await asyncio.gather(
        a.topics.create("raced", 2), b.topics.create("raced", 4), return_exceptions=True
    )
    winners = [r for r in results if isinstance(r, TopicInfo)]
    losers = [r for r in results if isinstance(r, KafkaError)]
    assert len(winners) == 1 and len(losers) == 1
    assert losers[0].code == ErrorCode.topic_already_exists
    assert a.topics.get("raced") == b.topics.get("raced") == winners[0]


async def test_auto_creation_takes_a_topic_another_node_made_and_makes_new_ones_for_all(
    nodes: tuple[Node, Node],
) -> None:
    """Auto-creating a name another node created (not yet refreshed here) gives that topic, not an
    error or a second id; a name nobody has is created with num.partitions for every node."""
    a, b = nodes
    made = await a.topics.create("t", 2)
    assert await b.topics.ensure("t") == made
    fresh = await b.topics.ensure("auto")
    assert fresh is not None and fresh.partitions == make_settings()["num.partitions"]
    await a.topics.refresh()
    assert a.topics.get("auto") == fresh


async def test_internal_topics_stay(nodes: tuple[Node, Node]) -> None:
    """The offsets topic is created once for both nodes and neither may delete it."""
    a, b = nodes
    assert await a.topics.ensure_offsets_topic(3) == 3
    assert await b.topics.ensure_offsets_topic(5) == 3
    with pytest.raises(KafkaError) as refused:
        await b.topics.delete("__consumer_offsets")
    assert refused.value.code == ErrorCode.invalid_request


def test_diff_orders_a_recreation_as_deletion_then_creation() -> None:
    """The pure diff: unknown names are created, missing ones deleted, a new id is both, growth and
    config changes are reported apart."""
    old = TopicInfo("re", uuid.uuid4(), 1)
    local = {"gone": TopicInfo("gone", uuid.uuid4(), 1), "re": old, "g": TopicInfo("g", uuid.uuid4(), 1)}
    new = TopicInfo("re", uuid.uuid4(), 1)
    grown = TopicInfo("g", local["g"].topic_id, 2, {"retention.ms": "1"})
    changes = diff(local, [new, grown, TopicInfo("fresh", uuid.uuid4(), 1)])
    assert sorted(t.name for t in changes.deleted) == ["gone", "re"]
    assert [t.name for t in changes.created] == ["re", "fresh"]
    assert changes.grown == [grown] and changes.reconfigured == [grown]


async def test_a_log_claimed_after_a_config_change_opens_with_the_topics_config(
    nodes: tuple[Node, Node],
) -> None:
    """A partition B never held, claimed after A altered its topic's configs (say retention.ms),
    is reopened by B's store with the config B's view pushed, not the store's default."""
    a, b = nodes
    await a.topics.create("t", 2)
    await a.topics.alter_configs("t", lambda _: {"retention.ms": "1234"})
    await b.topics.refresh()
    assert b.store.get("t", 1) is None
    claimed = await b.store.reopen("t", 1, 0)
    assert claimed.config.retention_ms == 1234
    await a.topics.alter_configs("t", lambda _: {"retention.ms": "4321"})
    await b.topics.refresh()
    assert claimed.config.retention_ms == 4321


async def test_many_topics_grow_in_one_catalogue_change_and_reach_the_other_node(
    nodes: tuple[Node, Node],
) -> None:
    """add_partitions_many on A grows its topics in one catalogue version, answers a topic B deleted
    and one that would shrink per name, and B hears PARTITIONS_ADDED for each grown topic."""
    a, b = nodes
    for name in ("x", "y", "gone"):
        await a.topics.create(name, 1)
    await b.topics.refresh()
    await b.topics.delete("gone")
    before = await TopicCatalogue(a.store.pool).version()
    found = await a.topics.add_partitions_many([("x", 3), ("y", 2), ("gone", 4)])
    assert await TopicCatalogue(a.store.pool).version() == before + 1
    grown_x, grown_y, refused = found["x"], found["y"], found["gone"]
    assert isinstance(grown_x, TopicInfo) and grown_x.partitions == 3
    assert isinstance(grown_y, TopicInfo) and grown_y.partitions == 2
    assert isinstance(refused, KafkaError) and refused.code == ErrorCode.unknown_topic_or_partition
    shrinking = (await a.topics.add_partitions_many([("x", 2)]))["x"]
    assert isinstance(shrinking, KafkaError) and shrinking.code == ErrorCode.invalid_partitions
    await b.topics.refresh()
    assert b.events[-2:] == [(TopicChange.PARTITIONS_ADDED, "x", 3), (TopicChange.PARTITIONS_ADDED, "y", 2)]


async def test_a_round_of_auto_created_topics_is_one_catalogue_change(nodes: tuple[Node, Node]) -> None:
    """ensure_many on A creates its new names in one catalogue version (a name B created meanwhile is
    B's topic, not refused), and B hears CREATED for each of A's."""
    a, b = nodes
    mine = await b.topics.create("theirs", 2)
    before = await TopicCatalogue(a.store.pool).version()
    found = await a.topics.ensure_many(["r1", "r2", "theirs", "r3"])
    assert await TopicCatalogue(a.store.pool).version() == before + 1
    assert found["theirs"] == mine
    assert [info.partitions for name, info in found.items() if name != "theirs" and info] == [1, 1, 1]
    await b.topics.refresh()
    assert [event for event in b.events if event[1].startswith("r")] == [
        (TopicChange.CREATED, name, 1) for name in ("r1", "r2", "r3")
    ]
