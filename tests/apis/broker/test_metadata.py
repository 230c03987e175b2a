"""Metadata v0-13 answered from the topic catalogue: shapes per version, auto-creation rules, errors."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kcoord.apis.access import OPERATIONS_OMITTED
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.security.acl import SUPPORTED_OPERATIONS, ResourceType
from kcoord.security.authorizer import operations_bits
from tests.apis.broker.topic_app import ADVERTISED, CLUSTER_ID, NODE_ID, TopicApp, call, open_app

ZERO = uuid.UUID(int=0)

CLUSTER_OPERATIONS = operations_bits(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])
TOPIC_OPERATIONS = operations_bits(SUPPORTED_OPERATIONS[ResourceType.TOPIC])


def _request(version: int, names: list[str] | None, **extra: Any) -> dict[str, Any]:
    topics = None if names is None else [{"name": n, "topic_id": ZERO} for n in names]
    return {
        "topics": topics,
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
        **extra,
    }


async def _metadata(app: TopicApp, version: int, names: list[str] | None, **extra: Any) -> Any:
    return await call(app, ApiKey.METADATA, version, _request(version, names, **extra))


async def _app_with_topics(tmp_path: Path, **flags: Any) -> TopicApp:
    app = await open_app(tmp_path, **flags)
    await app.topics.create("beta", 2)
    await app.topics.create("alpha", 1)
    await app.topics.ensure_offsets_topic(3)
    return app


@pytest.mark.parametrize("version", range(14))
async def test_every_version_lists_this_node_as_leader_of_every_partition(
    tmp_path: Path, version: int
) -> None:
    """At every version the one broker is the advertised node and leads, replicates and is the ISR, at
    leader epoch 0 from v7 (a single Kafka broker's epoch for a topic it created)."""
    app = await _app_with_topics(tmp_path)
    response = await _metadata(app, version, ["beta"])
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(NODE_ID, *ADVERTISED)]
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.none and topic.name == "beta"
    assert [p.partition_index for p in topic.partitions] == [0, 1]
    for partition in topic.partitions:
        assert partition.leader_id == NODE_ID
        assert partition.replica_nodes == (NODE_ID,) and partition.isr_nodes == (NODE_ID,)
        assert getattr(partition, "leader_epoch", 0) == 0
        assert version < 7 or hasattr(partition, "leader_epoch")
        assert getattr(partition, "offline_replicas", ()) == ()


async def test_v0_empty_list_means_all_topics_including_internal(tmp_path: Path) -> None:
    """v0 has no null list: an empty one asks for every topic, sorted by name."""
    app = await _app_with_topics(tmp_path)
    response = await _metadata(app, 0, [])
    assert [t.name for t in response.topics] == ["__consumer_offsets", "alpha", "beta"]


async def test_v1_null_means_all_and_empty_means_none(tmp_path: Path) -> None:
    """From v1 a null list is every topic (internal ones flagged) and an empty list is none."""
    app = await _app_with_topics(tmp_path)
    everything = await _metadata(app, 1, None)
    assert [(t.name, t.is_internal) for t in everything.topics] == [
        ("__consumer_offsets", True),
        ("alpha", False),
        ("beta", False),
    ]
    assert everything.controller_id == NODE_ID
    nothing = await _metadata(app, 1, [])
    assert nothing.topics == ()


async def test_v9_is_flexible_and_carries_cluster_id(tmp_path: Path) -> None:
    """v9 (first flexible version) carries the cluster id and controller and omits authorized operations."""
    app = await _app_with_topics(tmp_path)
    response = await _metadata(app, 9, ["alpha"])
    assert response.cluster_id == CLUSTER_ID and response.controller_id == NODE_ID
    assert response.cluster_authorized_operations == OPERATIONS_OMITTED
    assert response.topics[0].topic_authorized_operations == OPERATIONS_OMITTED


async def test_authorized_operations_are_given_when_asked(tmp_path: Path) -> None:
    """With no authorizer every topic and cluster operation is reported as allowed when requested."""
    app = await _app_with_topics(tmp_path)
    response = await _metadata(
        app,
        9,
        ["alpha"],
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    assert response.cluster_authorized_operations == CLUSTER_OPERATIONS
    assert response.topics[0].topic_authorized_operations == TOPIC_OPERATIONS


async def test_v12_carries_topic_ids_and_finds_topics_by_id(tmp_path: Path) -> None:
    """v10+ report each topic's id; v12 can ask by id alone, and an unknown id is UNKNOWN_TOPIC_ID."""
    app = await _app_with_topics(tmp_path)
    alpha = app.topics.get("alpha")
    assert alpha is not None
    by_name = await _metadata(app, 12, ["alpha"])
    assert by_name.topics[0].topic_id == alpha.topic_id
    stranger = uuid.uuid4()
    request = _request(12, None) | {
        "topics": [{"name": None, "topic_id": alpha.topic_id}, {"name": None, "topic_id": stranger}]
    }
    response = await call(app, ApiKey.METADATA, 12, request)
    found, missing = response.topics
    assert (found.name, found.error_code) == ("alpha", ErrorCode.none)
    assert (missing.name, missing.topic_id, missing.error_code) == (
        None,
        stranger,
        ErrorCode.unknown_topic_id,
    )


async def test_v13_has_a_zero_top_level_error(tmp_path: Path) -> None:
    """v13 adds a top-level error code, which is 0 for a served request."""
    app = await _app_with_topics(tmp_path)
    response = await _metadata(app, 13, None)
    assert response.error_code == ErrorCode.none and len(response.topics) == 3


@pytest.mark.parametrize("version", [0, 3, 4, 12])
async def test_unknown_topic_is_auto_created_and_returned_ready(tmp_path: Path, version: int) -> None:
    """Auto-creation (always before v4, when allowed from v4) answers with the ready topic at once."""
    app = await open_app(tmp_path, num_partitions=2)
    response = await _metadata(app, version, ["fresh"])
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.none and len(topic.partitions) == 2
    assert app.topics.get("fresh") is not None


async def test_v4_client_may_refuse_auto_creation(tmp_path: Path) -> None:
    """allow_auto_topic_creation=false leaves an unknown topic unknown."""
    app = await open_app(tmp_path)
    response = await _metadata(app, 4, ["fresh"], allow_auto_topic_creation=False)
    assert response.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert app.topics.names() == []


@pytest.mark.parametrize("version", [0, 12])
async def test_broker_setting_disables_auto_creation(tmp_path: Path, version: int) -> None:
    """auto.create.topics.enable=false wins over the request, at any version."""
    app = await open_app(tmp_path, auto_create_topics_enable=False)
    response = await _metadata(app, version, ["fresh"])
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.unknown_topic_or_partition and topic.partitions == ()
    assert getattr(topic, "topic_id", None) is None  # kio reads the zero UUID back as None


@pytest.mark.parametrize("version", [1, 12])
async def test_illegal_name_is_invalid_topic(tmp_path: Path, version: int) -> None:
    """An illegal requested name is INVALID_TOPIC_EXCEPTION and is never created."""
    app = await open_app(tmp_path)
    response = await _metadata(app, version, ["bad name"])
    assert response.topics[0].error_code == ErrorCode.invalid_topic_exception
    assert app.topics.names() == []


async def test_internal_topic_is_not_auto_created(tmp_path: Path) -> None:
    """Asking for a missing __consumer_offsets does not create it (the coordinator does)."""
    app = await open_app(tmp_path)
    response = await _metadata(app, 9, ["__consumer_offsets"])
    assert response.topics[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_repeated_names_are_answered_once(tmp_path: Path) -> None:
    """A name asked twice gets one entry, in request order with the others."""
    app = await _app_with_topics(tmp_path)
    response = await _metadata(app, 9, ["beta", "alpha", "beta"])
    assert [t.name for t in response.topics] == ["beta", "alpha"]
