"""The all-topics Metadata cache with an authorizer and in a cluster: an answer is served again only
to a request that would get the same one (same ACLs, principal and host as the authorizer sees
them, same catalogue, same live nodes and owners), and served again it is the same encoded object."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from kio.serial import entity_reader

from kcoord.cluster.membership import ClusterMembership, LeaseSettings, MembershipDirectory
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import EncodedResponse, RequestHeader, build, request_class, response_class
from kcoord.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from kcoord.security.authorizer import AclAuthorizer
from kcoord.security.principal import KafkaPrincipal
from kcoord.server.context import ConnectionInfo, RequestContext
from kcoord.storage import LogConfig
from kcoord.storage.api import PartitionLog
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.ownership import Ownership
from tests.apis.broker.topic_app import NODE_ID, TopicApp, open_app, secured_app
from tests.support.postgres import PostgresCluster

ALICE, BOB = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "bob")
LOCAL, OTHER_HOST = "127.0.0.1", "127.0.0.2"
VERSION = 12


def _request() -> Any:
    body = {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": True,
    }
    return build(request_class(ApiKey.METADATA, VERSION), body)


async def _all_topics(app: TopicApp, principal: KafkaPrincipal = ALICE, host: str = LOCAL) -> EncodedResponse:
    """The handler's all-topics answer for ``principal`` connected from ``host``."""
    spec = app.registry.get(ApiKey.METADATA)
    assert spec is not None
    header = RequestHeader(ApiKey.METADATA, VERSION, correlation_id=1, client_id="cache-tests")
    ctx = RequestContext(header=header, connection=ConnectionInfo(1, host, 50000, principal=principal))
    answer = await spec.handler(ctx, _request())
    assert isinstance(answer, EncodedResponse)
    return answer


def _decoded(answer: EncodedResponse) -> Any:
    decoded, end = entity_reader(response_class(ApiKey.METADATA, VERSION))(answer.body, 0)
    assert end == len(answer.body)
    return decoded


def _names(answer: EncodedResponse) -> set[str]:
    return {topic.name for topic in _decoded(answer).topics}


def _grant(principal: KafkaPrincipal, topic: str, host: str = "*") -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        topic,
        PatternType.LITERAL,
        str(principal),
        host,
        AclOperation.DESCRIBE,
        AclPermission.ALLOW,
    )


async def _secured(tmp_path: Path) -> tuple[TopicApp, AclAuthorizer]:
    """Topics alpha and beta; alice may describe alpha, bob beta."""
    return await secured_app(tmp_path, {"alpha": 1, "beta": 1}, [_grant(ALICE, "alpha"), _grant(BOB, "beta")])


async def test_with_an_authorizer_the_same_principal_is_served_the_cached_answer(tmp_path: Path) -> None:
    """Asked twice by alice (and by a principal no ACL names, twice): the same encoded answer each time."""
    app, _ = await _secured(tmp_path)
    first = await _all_topics(app)
    assert _names(first) == {"alpha"}
    assert await _all_topics(app) is first
    stranger = KafkaPrincipal("User", "carol")
    unnamed = await _all_topics(app, stranger)
    assert _names(unnamed) == set()
    assert await _all_topics(app, KafkaPrincipal("User", "dave"), OTHER_HOST) is unnamed


async def test_another_principal_gets_its_own_answer(tmp_path: Path) -> None:
    """Alice's cached answer is never served to bob: each sees the topic it may describe."""
    app, _ = await _secured(tmp_path)
    assert _names(await _all_topics(app, ALICE)) == {"alpha"}
    assert _names(await _all_topics(app, BOB)) == {"beta"}
    assert _names(await _all_topics(app, ALICE)) == {"alpha"}


async def test_a_changed_acl_gets_a_fresh_answer(tmp_path: Path) -> None:
    """A grant and then its deletion show in alice's very next answer."""
    app, authorizer = await _secured(tmp_path)
    assert _names(await _all_topics(app)) == {"alpha"}
    await authorizer.create([_grant(ALICE, "beta")])
    assert _names(await _all_topics(app)) == {"alpha", "beta"}
    granted = _grant(ALICE, "beta")
    filter_ = AclBindingFilter(
        granted.resource_type,
        granted.resource_name,
        granted.pattern_type,
        granted.principal,
        granted.host,
        granted.operation,
        granted.permission,
    )
    await authorizer.delete([filter_])
    assert _names(await _all_topics(app)) == {"alpha"}


async def test_a_host_named_by_an_acl_gets_its_own_answer(tmp_path: Path) -> None:
    """A grant for alice from one host only: alice from that host sees beta, from another she does not."""
    app, authorizer = await _secured(tmp_path)
    await authorizer.create([_grant(ALICE, "beta", host=OTHER_HOST)])
    assert _names(await _all_topics(app, ALICE, LOCAL)) == {"alpha"}
    assert _names(await _all_topics(app, ALICE, OTHER_HOST)) == {"alpha", "beta"}
    assert _names(await _all_topics(app, ALICE, LOCAL)) == {"alpha"}


async def test_a_new_topic_gets_a_fresh_answer_with_an_authorizer(tmp_path: Path) -> None:
    """A topic created after the answer was cached is in the next one (when the principal may see it)."""
    app, authorizer = await _secured(tmp_path)
    assert _names(await _all_topics(app)) == {"alpha"}
    await authorizer.create([_grant(ALICE, "gamma")])
    await app.topics.create("gamma", 2)
    answer = _decoded(await _all_topics(app))
    assert {t.name: len(t.partitions) for t in answer.topics} == {"alpha": 1, "gamma": 2}


class _Host:
    """What a membership hands its partitions to (the metadata test only reads leaders)."""

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None:
        return None

    async def release(self, partition: int) -> None:
        return None


def _leaders(answer: EncodedResponse) -> dict[int, int]:
    (topic,) = [t for t in _decoded(answer).topics if t.name == "t"]
    return {int(p.partition_index): int(p.leader_id) for p in topic.partitions}


async def test_in_a_cluster_a_changed_ownership_gets_a_fresh_answer(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """Node 7 alone leads every partition (asked twice: one cached answer); once node 8 joins and
    takes its share, node 7's next answer lists both brokers and node 8 as leader of that share."""
    store = PostgresLogStore(postgres_cluster.create_database(), LogConfig(), retention_check_interval_ms=0)
    await store.open()
    for partition in range(4):
        await store.create("t", partition)
    settings = LeaseSettings(lease_ms=4000, renew_ms=250)

    def member(node_id: int) -> ClusterMembership:
        return ClusterMembership(
            Ownership(store.pool),
            store,
            node_id,
            lambda: ("127.0.0.1", 9000 + node_id),
            lambda topic: _Host(),
            lambda: [("t", p) for p in range(4)],
            settings,
        )

    seven, eight = member(NODE_ID), member(8)
    app = await open_app(tmp_path)
    await app.topics.create("t", 4)
    app.node.directory = MembershipDirectory(seven, lambda group_id: 0)
    await seven.start()
    try:
        alone = await _all_topics(app)
        assert _leaders(alone) == dict.fromkeys(range(4), NODE_ID)
        assert await _all_topics(app) is alone
        await eight.start()
        deadline = time.monotonic() + 30
        while set(_leaders(await _all_topics(app)).values()) != {NODE_ID, 8} and time.monotonic() < deadline:
            await seven.tick()
            await eight.tick()
            await asyncio.sleep(0.05)
        shared = await _all_topics(app)
        assert sorted(_leaders(shared).values()) == [NODE_ID, NODE_ID, 8, 8]
        assert [int(b.node_id) for b in _decoded(shared).brokers] == [NODE_ID, 8]
        assert uuid.UUID(int=0) not in {t.topic_id for t in _decoded(shared).topics}
    finally:
        await eight.stop()
        await seven.stop()
        await store.close()
