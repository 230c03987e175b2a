"""OffsetForLeaderEpoch on a node alone: every partition has one leader epoch, 0, which ends at the
log end; the current-epoch check, unknown partitions and authorization as Kafka answers them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from kcoord.security.authorizer import AclAuthorizer
from tests.apis.broker.data_path_helpers import make_batch
from tests.apis.broker.topic_app import TopicApp, call, open_app
from tests.support.served import served_spec


def _body(*parts: tuple[str, int, int, int]) -> dict[str, Any]:
    """(topic, partition, current_leader_epoch, leader_epoch) per partition asked for."""
    topics: dict[str, list[dict[str, int]]] = {}
    for topic, partition, current, requested in parts:
        topics.setdefault(topic, []).append(
            {"partition": partition, "current_leader_epoch": current, "leader_epoch": requested}
        )
    return {"replica_id": -1, "topics": [{"topic": t, "partitions": p} for t, p in topics.items()]}


async def _answers(app: TopicApp, version: int, *parts: tuple[str, int, int, int]) -> list[tuple[int, ...]]:
    response = await call(app, ApiKey.OFFSET_FOR_LEADER_EPOCH, version, _body(*parts))
    return [
        (int(p.error_code), int(p.partition), int(p.leader_epoch), int(p.end_offset))
        for t in response.topics
        for p in t.partitions
    ]


@pytest.fixture
async def app(tmp_path: Path) -> TopicApp:
    app = await open_app(tmp_path)
    await app.topics.create("t", 2)
    partition_log = app.topics.partition_log("t", 0)
    assert partition_log is not None
    await partition_log.append(make_batch([b"a", b"b", b"c"]))
    return app


@pytest.mark.parametrize("version", [2, 3, 4])
async def test_epoch_zero_ends_at_the_log_end(app: TopicApp, version: int) -> None:
    """Epoch 0, checked or not against current epoch 0, ends at the log end (3; 0 when empty)."""
    answers = await _answers(app, version, ("t", 0, 0, 0), ("t", 1, -1, 0))
    assert answers == [(ErrorCode.none, 0, 0, 3), (ErrorCode.none, 1, 0, 0)]


async def test_undefined_epochs(app: TopicApp) -> None:
    """An epoch the leader never had (newer than its own, or -1) answers leader epoch -1, offset -1."""
    answers = await _answers(app, 4, ("t", 0, -1, 1), ("t", 0, -1, -1))
    assert answers == [(ErrorCode.none, 0, -1, -1), (ErrorCode.none, 0, -1, -1)]


async def test_current_epoch_is_checked(app: TopicApp) -> None:
    """A current epoch newer than the leader's is UNKNOWN_LEADER_EPOCH, an older one FENCED."""
    answers = await _answers(app, 4, ("t", 0, 1, 0), ("t", 1, -5, 0))
    assert [a[0] for a in answers] == [ErrorCode.unknown_leader_epoch, ErrorCode.fenced_leader_epoch]


async def test_unknown_topic_and_partition(app: TopicApp) -> None:
    """A topic or partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION."""
    answers = await _answers(app, 2, ("nope", 0, -1, 0), ("t", 5, -1, 0))
    assert [a[0] for a in answers] == [ErrorCode.unknown_topic_or_partition] * 2


async def test_needs_topic_describe_or_cluster_action(tmp_path: Path) -> None:
    """Topic DESCRIBE answers a topic, Cluster CLUSTER_ACTION every topic; otherwise
    TOPIC_AUTHORIZATION_FAILED for each of its partitions."""
    app = await open_app(tmp_path / "a", authorizer_class_name="kcoord.security.StandardAuthorizer")
    for name in ("alpha", "beta"):
        await app.topics.create(name, 1)
    authorizer = app.authorizer
    assert isinstance(authorizer, AclAuthorizer)
    await authorizer.load()

    def grant(kind: ResourceType, name: str, op: AclOperation) -> AclBinding:
        return AclBinding(kind, name, PatternType.LITERAL, "User:ANONYMOUS", "*", op, AclPermission.ALLOW)

    await authorizer.create([grant(ResourceType.TOPIC, "alpha", AclOperation.DESCRIBE)])
    answers = await _answers(app, 3, ("alpha", 0, -1, 0), ("beta", 0, -1, 0))
    assert [a[0] for a in answers] == [ErrorCode.none, ErrorCode.topic_authorization_failed]
    await authorizer.create([grant(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION)])
    answers = await _answers(app, 3, ("alpha", 0, -1, 0), ("beta", 0, -1, 0))
    assert [a[0] for a in answers] == [ErrorCode.none, ErrorCode.none]


def test_advertised_versions() -> None:
    """OffsetForLeaderEpoch is advertised v2-v4: librdkafka sends v2, Java's consumer v3+; Kafka 4.0
    dropped v0-v1."""
    spec = served_spec(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    assert (spec.min_version, spec.max_version) == (2, 4)
