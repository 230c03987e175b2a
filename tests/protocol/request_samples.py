"""One realistic request per API key, in the newest field names, and what its answer must show.

:func:`kcoord.protocol.codec.build` drops the fields a version lacks, so a sample holds the fields
of every version at once (``key`` for FindCoordinator v0-3 beside ``coordinator_keys`` for v4+,
say). A :class:`Case` may first prepare the server over the same connection (a topic to produce
to, a group to heartbeat in) with setup requests at fixed versions; its check then asserts the
error code NONE and something the API is for. ``tests/protocol/test_round_trip.py`` runs every
case at every version ApiVersions advertises.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient
from tests.support.batches import build_batch
from tests.support.served import served_apis

LATEST_TIMESTAMP = -1
TOPIC_RESOURCE = 2
CONSUMER = "consumer"
RANGE = "range"


def assignment(topic: str) -> bytes:
    """A consumer-protocol assignment (v0) of partition 0 of ``topic`` with no user data."""
    encoded = topic.encode()
    return struct.pack(">hih", 0, 1, len(encoded)) + encoded + struct.pack(">iii", 1, 0, -1)


def subscription(*topics: str) -> bytes:
    """A consumer-protocol subscription (v0) to ``topics`` with no user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        encoded = topic.encode()
        out += struct.pack(">h", len(encoded)) + encoded
    return out + struct.pack(">i", -1)


@dataclass
class Scene:
    """One round trip: the connection, the version under test and what setup left behind."""

    client: AsyncRawClient
    version: int
    port: int
    node_id: int
    topic: str = "round-trip"
    group: str = "round-trip-group"
    member_id: str = ""
    generation: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    topic_id: uuid.UUID | None = None
    """The scene's topic's id, where a setup looked it up (share group APIs name topics by id)."""


Sample = Callable[[Scene], dict[str, Any]]
Check = Callable[[Scene, Any], Awaitable[None]]
Setup = Callable[[Scene], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    sample: Sample
    check: Check
    setup: Setup | None = None


# -- setup requests, each at one fixed version


async def create_topic(scene: Scene, name: str | None = None, partitions: int = 1) -> None:
    """CreateTopics v4 of one topic (default: the scene's)."""
    response = await scene.client.call(
        ApiKey.CREATE_TOPICS,
        4,
        {
            "topics": [
                {
                    "name": name or scene.topic,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 10_000,
        },
    )
    assert response.topics[0].error_code == ErrorCode.none


async def create_topic_with_one_record(scene: Scene) -> None:
    """The scene's topic, holding one record at offset 0 (Produce v7)."""
    await create_topic(scene)
    response = await scene.client.call(ApiKey.PRODUCE, 7, produce_sample(scene))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


async def commit_offset(scene: Scene, offset: int = 42) -> None:
    """The scene's topic exists and the scene's (simple) group committed ``offset`` for its partition 0."""
    await create_topic(scene)
    response = await scene.client.call(ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset))
    assert response.topics[0].partitions[0].error_code == ErrorCode.none


async def join(scene: Scene) -> None:
    """A one-member group: JoinGroup v5 (with the MEMBER_ID_REQUIRED round) leaves id and generation."""
    first = await scene.client.call(ApiKey.JOIN_GROUP, 5, join_sample(scene))
    assert first.error_code == ErrorCode.member_id_required
    scene.member_id = first.member_id
    joined = await scene.client.call(ApiKey.JOIN_GROUP, 5, join_sample(scene))
    assert joined.error_code == ErrorCode.none
    scene.generation = int(joined.generation_id)


async def join_and_sync(scene: Scene) -> None:
    """A Stable one-member group (JoinGroup v5, SyncGroup v3)."""
    await join(scene)
    synced = await scene.client.call(ApiKey.SYNC_GROUP, 3, sync_sample(scene))
    assert synced.error_code == ErrorCode.none


# -- samples


def produce_sample(scene: Scene) -> dict[str, Any]:
    records = build_batch([(b"key", b"value")], timestamp_ms=1_700_000_000_000)
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [{"name": scene.topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def fetch_sample(scene: Scene) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": scene.topic,
                "partitions": [
                    {
                        "partition": 0,
                        "fetch_offset": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def list_offsets_sample(scene: Scene, timestamp: int = LATEST_TIMESTAMP) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": scene.topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
    }


def metadata_sample(scene: Scene) -> dict[str, Any]:
    return {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": scene.topic}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


COMMITTED_EPOCH = 3
"""The leader epoch the samples commit (OffsetCommit v6+ carries it; OffsetFetch v5+ returns it)."""


def commit_sample(scene: Scene, offset: int = 42) -> dict[str, Any]:
    return {
        "group_id": scene.group,
        "generation_id_or_member_epoch": scene.generation,
        "member_id": scene.member_id,
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [
            {
                "name": scene.topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": COMMITTED_EPOCH,
                        "committed_metadata": "round trip",
                    }
                ],
            }
        ],
    }


def offset_fetch_sample(scene: Scene) -> dict[str, Any]:
    topics = [{"name": scene.topic, "partition_indexes": [0]}]
    return {
        "group_id": scene.group,
        "topics": topics,
        "groups": [{"group_id": scene.group, "topics": topics}],
        "require_stable": True,
    }


def find_coordinator_sample(scene: Scene) -> dict[str, Any]:
    return {"key": scene.group, "key_type": 0, "coordinator_keys": [scene.group]}


def join_sample(scene: Scene) -> dict[str, Any]:
    return {
        "group_id": scene.group,
        "session_timeout": 30_000,
        "rebalance_timeout": 60_000,
        "member_id": scene.member_id,
        "group_instance_id": None,
        "protocol_type": CONSUMER,
        "protocols": [{"name": RANGE, "metadata": subscription(scene.topic)}],
        "reason": "round trip",
    }


def heartbeat_sample(scene: Scene) -> dict[str, Any]:
    return {
        "group_id": scene.group,
        "generation_id": scene.generation,
        "member_id": scene.member_id,
        "group_instance_id": None,
    }


def leave_sample(scene: Scene) -> dict[str, Any]:
    return {
        "group_id": scene.group,
        "member_id": scene.member_id,
        "members": [{"member_id": scene.member_id, "group_instance_id": None, "reason": "round trip"}],
    }


def sync_sample(scene: Scene) -> dict[str, Any]:
    return {
        "group_id": scene.group,
        "generation_id": scene.generation,
        "member_id": scene.member_id,
        "group_instance_id": None,
        "protocol_type": CONSUMER,
        "protocol_name": RANGE,
        "assignments": [{"member_id": scene.member_id, "assignment": assignment(scene.topic)}],
    }


def describe_groups_sample(scene: Scene) -> dict[str, Any]:
    return {"groups": [scene.group, "no-such-group"], "include_authorized_operations": False}


def list_groups_sample(scene: Scene) -> dict[str, Any]:
    return {"states_filter": ["stable"], "types_filter": ["classic"]}


def api_versions_sample(scene: Scene) -> dict[str, Any]:
    return {"client_software_name": "kcoord-round-trip", "client_software_version": "1.0"}


def create_topics_sample(scene: Scene) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": scene.topic,
                "num_partitions": 2,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": "cleanup.policy", "value": "delete"}],
            }
        ],
        "timeout": 10_000,
        "validate_only": False,
    }


def delete_topics_sample(scene: Scene) -> dict[str, Any]:
    return {
        "topic_names": [scene.topic],
        "topics": [{"name": scene.topic, "topic_id": uuid.UUID(int=0)}],
        "timeout": 10_000,
    }


def delete_records_sample(scene: Scene) -> dict[str, Any]:
    return {
        "topics": [{"name": scene.topic, "partitions": [{"partition_index": 0, "offset": 1}]}],
        "timeout": 5_000,
    }


def offset_for_leader_epoch_sample(scene: Scene) -> dict[str, Any]:
    """Where epoch 0 (a node alone has no other) ended, checked against current epoch 0."""
    partition = {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}
    return {"replica_id": -1, "topics": [{"topic": scene.topic, "partitions": [partition]}]}


def init_producer_id_sample(scene: Scene) -> dict[str, Any]:
    return {"transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}


def describe_configs_sample(scene: Scene) -> dict[str, Any]:
    return {
        "resources": [
            {
                "resource_type": TOPIC_RESOURCE,
                "resource_name": scene.topic,
                "configuration_keys": ["cleanup.policy"],
            }
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }


def create_partitions_sample(scene: Scene) -> dict[str, Any]:
    return {
        "topics": [{"name": scene.topic, "count": 3, "assignments": None}],
        "timeout": 10_000,
        "validate_only": False,
    }


def delete_groups_sample(scene: Scene) -> dict[str, Any]:
    return {"groups_names": [scene.group]}


def offset_delete_sample(scene: Scene) -> dict[str, Any]:
    return {
        "group_id": scene.group,
        "topics": [{"name": scene.topic, "partitions": [{"partition_index": 0}]}],
    }


def describe_cluster_sample(scene: Scene) -> dict[str, Any]:
    return {
        "include_cluster_authorized_operations": False,
        "endpoint_type": 1,
        "include_fenced_brokers": False,
    }


def sasl_handshake_sample(scene: Scene) -> dict[str, Any]:
    return {"mechanism": "SCRAM-SHA-512"}


def sasl_authenticate_sample(scene: Scene) -> dict[str, Any]:
    return {"auth_bytes": b"n,,n=alice,r=abc"}


def _scram_user(scene: Scene) -> str:
    return f"round-trip-user-v{scene.version}"


def alter_scram_sample(scene: Scene) -> dict[str, Any]:
    return {
        "deletions": [],
        "upsertions": [
            {
                "name": _scram_user(scene),
                "mechanism": 2,
                "iterations": 4096,
                "salt": b"0123456789abcdef",
                "salted_password": bytes(64),
            }
        ],
    }


def describe_scram_sample(scene: Scene) -> dict[str, Any]:
    return {"users": [{"name": _scram_user(scene)}]}


async def upsert_scram_user(scene: Scene) -> None:
    """AlterUserScramCredentials v0 gives the scene's user a SCRAM-SHA-512 credential."""
    response = await scene.client.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, alter_scram_sample(scene))
    assert [r.error_code for r in response.results] == [ErrorCode.none]


# -- checks


async def check_produce(scene: Scene, response: Any) -> None:
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.none
    assert answer.base_offset == 0


async def check_fetch(scene: Scene, response: Any) -> None:
    answer = response.responses[0].partitions[0]
    assert answer.error_code == ErrorCode.none
    assert answer.high_watermark == 1
    assert answer.records, "the produced record comes back"


async def check_list_offsets(scene: Scene, response: Any) -> None:
    answer = response.topics[0].partitions[0]
    assert answer.error_code == ErrorCode.none
    assert answer.offset == 1, "the latest offset follows the one record"


async def check_offset_for_leader_epoch(scene: Scene, response: Any) -> None:
    (topic,) = response.topics
    (answer,) = topic.partitions
    assert (topic.topic, answer.partition, answer.error_code) == (scene.topic, 0, ErrorCode.none)
    assert (answer.leader_epoch, answer.end_offset) == (0, 1), "the current epoch ends at the log end"


async def check_metadata(scene: Scene, response: Any) -> None:
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (scene.node_id, "127.0.0.1", scene.port)
    ]
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.none
    assert topic.name == scene.topic
    assert [p.leader_id for p in topic.partitions] == [scene.node_id]


async def check_offset_commit(scene: Scene, response: Any) -> None:
    assert response.topics[0].partitions[0].error_code == ErrorCode.none


async def check_offset_fetch(scene: Scene, response: Any) -> None:
    if scene.version >= 8:
        (group,) = response.groups
        assert group.error_code == ErrorCode.none
        topics = group.topics
    else:
        if scene.version >= 2:
            assert response.error_code == ErrorCode.none
        topics = response.topics
    partition = topics[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    assert (partition.committed_offset, partition.metadata) == (42, "round trip")
    if scene.version >= 5:
        assert partition.committed_leader_epoch == COMMITTED_EPOCH, "stored from OffsetCommit v8"


async def check_find_coordinator(scene: Scene, response: Any) -> None:
    answer = response.coordinators[0] if scene.version >= 4 else response
    assert answer.error_code == ErrorCode.none
    assert (answer.node_id, answer.host, answer.port) == (scene.node_id, "127.0.0.1", scene.port)


async def check_join_group(scene: Scene, response: Any) -> None:
    """v4+ first answers MEMBER_ID_REQUIRED with an id; the rejoin with it forms the group."""
    if scene.version >= 4:
        assert response.error_code == ErrorCode.member_id_required
        assert response.member_id
        scene.member_id = response.member_id
        response = await scene.client.call(ApiKey.JOIN_GROUP, scene.version, join_sample(scene))
    assert response.error_code == ErrorCode.none
    assert response.member_id and response.leader == response.member_id
    assert response.generation_id == 1
    assert response.protocol_name == RANGE
    assert [(m.member_id, bytes(m.metadata)) for m in response.members] == [
        (response.member_id, subscription(scene.topic))
    ]


async def check_error_none(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none


async def check_leave_group(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    if scene.version >= 3:
        assert [(m.member_id, m.error_code) for m in response.members] == [(scene.member_id, ErrorCode.none)]
    described = await scene.client.call(ApiKey.DESCRIBE_GROUPS, 0, {"groups": [scene.group]})
    assert described.groups[0].group_state == "Empty"


async def check_sync_group(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    assert bytes(response.assignment) == assignment(scene.topic)
    if scene.version >= 5:
        assert (response.protocol_type, response.protocol_name) == (CONSUMER, RANGE)


async def check_describe_groups(scene: Scene, response: Any) -> None:
    known, unknown = response.groups
    assert (known.error_code, known.group_state, known.protocol_data) == (ErrorCode.none, "Stable", RANGE)
    assert [m.member_id for m in known.members] == [scene.member_id]
    assert (unknown.error_code, unknown.group_state) == (ErrorCode.none, "Dead")


async def join_sync_and_commit_for_an_empty_group(scene: Scene) -> None:
    """A Stable group (the scene's) and an Empty simple group beside it (``<group>-empty``)."""
    await join_and_sync(scene)
    empty = Scene(scene.client, scene.version, scene.port, scene.node_id, scene.topic, f"{scene.group}-empty")
    await commit_offset(empty)


async def check_list_groups(scene: Scene, response: Any) -> None:
    """Both groups before v4; from v4 the ``stable`` filter leaves the Empty one out."""
    assert response.error_code == ErrorCode.none
    listed = {g.group_id: g for g in response.groups}
    assert listed[scene.group].protocol_type == CONSUMER
    if scene.version < 4:
        assert listed[f"{scene.group}-empty"].protocol_type == ""
        return
    assert f"{scene.group}-empty" not in listed
    assert {g.group_state for g in response.groups} == {"Stable"}
    if scene.version >= 5:
        assert {g.group_type for g in response.groups} == {"classic"}


async def check_api_versions(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    advertised = {(int(k.api_key), int(k.min_version), int(k.max_version)) for k in response.api_keys}
    assert advertised == {(s.key, s.min_version, s.max_version) for s in served_apis()}


async def check_create_topics(scene: Scene, response: Any) -> None:
    (topic,) = response.topics
    assert (topic.name, topic.error_code) == (scene.topic, ErrorCode.none)
    if scene.version >= 5:
        assert (topic.num_partitions, topic.replication_factor) == (2, 1)


async def check_delete_topics(scene: Scene, response: Any) -> None:
    (deleted,) = response.responses
    assert (deleted.name, deleted.error_code) == (scene.topic, ErrorCode.none)
    metadata = await scene.client.call(ApiKey.METADATA, 4, metadata_sample(scene))
    assert metadata.topics[0].error_code == ErrorCode.unknown_topic_or_partition


async def check_delete_records(scene: Scene, response: Any) -> None:
    (result,) = response.topics[0].partitions
    assert (result.error_code, result.low_watermark) == (ErrorCode.none, 1)
    earliest = await scene.client.call(ApiKey.LIST_OFFSETS, 1, list_offsets_sample(scene, timestamp=-2))
    assert earliest.topics[0].partitions[0].offset == 1


async def check_init_producer_id(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    assert response.producer_id >= 0 and response.producer_epoch >= 0


async def check_describe_configs(scene: Scene, response: Any) -> None:
    (result,) = response.results
    assert (result.error_code, result.resource_name) == (ErrorCode.none, scene.topic)
    assert [(c.name, c.value) for c in result.configs] == [("cleanup.policy", "delete")]


async def check_create_partitions(scene: Scene, response: Any) -> None:
    assert [(r.name, r.error_code) for r in response.results] == [(scene.topic, ErrorCode.none)]
    metadata = await scene.client.call(ApiKey.METADATA, 4, metadata_sample(scene))
    assert len(metadata.topics[0].partitions) == 3


async def check_delete_groups(scene: Scene, response: Any) -> None:
    assert [(r.group_id, r.error_code) for r in response.results] == [(scene.group, ErrorCode.none)]
    described = await scene.client.call(ApiKey.DESCRIBE_GROUPS, 0, {"groups": [scene.group]})
    assert described.groups[0].group_state == "Dead"


async def check_offset_delete(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    fetched = await scene.client.call(ApiKey.OFFSET_FETCH, 2, offset_fetch_sample(scene))
    assert fetched.topics[0].partitions[0].committed_offset == -1


async def check_describe_cluster(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
        (scene.node_id, "127.0.0.1", scene.port)
    ]
    assert response.cluster_id


async def check_sasl_on_plaintext_listener(scene: Scene, response: Any) -> None:
    """The round-trip server's listener is PLAINTEXT: SASL requests are out of place there."""
    assert response.error_code == ErrorCode.illegal_sasl_state


async def check_alter_scram(scene: Scene, response: Any) -> None:
    assert [(r.user, r.error_code) for r in response.results] == [(_scram_user(scene), ErrorCode.none)]


async def check_describe_scram(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    [result] = response.results
    assert (result.user, result.error_code) == (_scram_user(scene), ErrorCode.none)
    assert [(c.mechanism, c.iterations) for c in result.credential_infos] == [(2, 4096)]


# The round trips run a server without an authorizer, where Kafka answers the ACL APIs with
# SECURITY_DISABLED; tests/clients/test_acls.py drives them with the authorizer on.
def _acl_filter() -> dict[str, Any]:
    return {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }


def describe_acls_sample(scene: Scene) -> dict[str, Any]:
    return _acl_filter()


def create_acls_sample(scene: Scene) -> dict[str, Any]:
    creation = {
        "resource_type": 3,
        "resource_name": scene.group,
        "resource_pattern_type": 3,
        "principal": "User:alice",
        "host": "*",
        "operation": 3,
        "permission_type": 3,
    }
    return {"creations": [creation]}


def delete_acls_sample(scene: Scene) -> dict[str, Any]:
    return {"filters": [_acl_filter()]}


async def check_describe_acls_disabled(scene: Scene, response: Any) -> None:
    assert (response.error_code, list(response.resources)) == (ErrorCode.security_disabled, [])


async def check_create_acls_disabled(scene: Scene, response: Any) -> None:
    assert [r.error_code for r in response.results] == [ErrorCode.security_disabled]


async def check_delete_acls_disabled(scene: Scene, response: Any) -> None:
    assert [r.error_code for r in response.filter_results] == [ErrorCode.security_disabled]


def consumer_heartbeat_sample(scene: Scene) -> dict[str, Any]:
    """A KIP-848 join: epoch 0, a client-made member id, one subscribed topic."""
    return {
        "group_id": scene.group,
        "member_id": str(uuid.uuid4()),
        "member_epoch": 0,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": [scene.topic],
        "topic_partitions": [],
    }


async def check_consumer_heartbeat(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    assert response.member_epoch > 0
    assert [list(tp.partitions) for tp in response.assignment.topic_partitions] == [[0]]


async def consumer_group_join(scene: Scene) -> None:
    """The scene's topic and a consumer group with one member (ConsumerGroupHeartbeat v0)."""
    await create_topic(scene)
    joined = await scene.client.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, consumer_heartbeat_sample(scene))
    assert joined.error_code == ErrorCode.none


def consumer_group_describe_sample(scene: Scene) -> dict[str, Any]:
    return {"group_ids": [scene.group, "no-such-group"], "include_authorized_operations": False}


async def check_consumer_group_describe(scene: Scene, response: Any) -> None:
    group, missing = response.groups
    assert group.error_code == ErrorCode.none
    assert group.group_state == "Stable"
    (member,) = group.members
    assert [(tp.topic_name, list(tp.partitions)) for tp in member.assignment.topic_partitions] == [
        (scene.topic, [0])
    ]
    assert missing.error_code == ErrorCode.group_id_not_found


def incremental_alter_configs_sample(scene: Scene) -> dict[str, Any]:
    """One group's heartbeat interval set; GROUP is config resource type 32."""
    return {
        "resources": [
            {
                "resource_type": 32,
                "resource_name": scene.group,
                "configs": [
                    {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "1000"}
                ],
            }
        ],
        "validate_only": False,
    }


async def check_incremental_alter_configs(scene: Scene, response: Any) -> None:
    (result,) = response.responses
    assert (result.error_code, result.resource_type, result.resource_name) == (
        ErrorCode.none,
        32,
        scene.group,
    )


def alter_configs_sample(scene: Scene) -> dict[str, Any]:
    """This node's log.retention.ms set as its whole dynamic config set; BROKER is resource type 4."""
    return {
        "resources": [
            {
                "resource_type": 4,
                "resource_name": str(scene.node_id),
                "configs": [{"name": "log.retention.ms", "value": "3600000"}],
            }
        ],
        "validate_only": False,
    }


async def check_alter_configs(scene: Scene, response: Any) -> None:
    (result,) = response.responses
    assert (result.error_code, result.resource_type, result.resource_name) == (
        ErrorCode.none,
        4,
        str(scene.node_id),
    )


MARKER_PRODUCER_ID = 4242


def write_txn_markers_sample(scene: Scene) -> dict[str, Any]:
    """An abort marker of one producer for partition 0 of the scene's topic."""
    marker = {
        "producer_id": MARKER_PRODUCER_ID,
        "producer_epoch": 3,
        "transaction_result": False,
        "topics": [{"name": scene.topic, "partition_indexes": [0]}],
        "coordinator_epoch": 7,
    }
    return {"markers": [marker]}


async def check_write_txn_markers(scene: Scene, response: Any) -> None:
    (marker,) = response.markers
    assert marker.producer_id == MARKER_PRODUCER_ID
    assert [(p.partition_index, p.error_code) for p in marker.topics[0].partitions] == [(0, ErrorCode.none)]
    latest = await scene.client.call(ApiKey.LIST_OFFSETS, 1, list_offsets_sample(scene))
    assert latest.topics[0].partitions[0].offset == 2, "the marker took the offset after the record"


async def write_one_marker(scene: Scene) -> None:
    """The scene's topic, holding one record and an abort marker of :data:`MARKER_PRODUCER_ID`."""
    await create_topic_with_one_record(scene)
    response = await scene.client.call(ApiKey.WRITE_TXN_MARKERS, 1, write_txn_markers_sample(scene))
    assert response.markers[0].topics[0].partitions[0].error_code == ErrorCode.none


def describe_producers_sample(scene: Scene) -> dict[str, Any]:
    return {"topics": [{"name": scene.topic, "partition_indexes": [0]}]}


async def check_describe_producers(scene: Scene, response: Any) -> None:
    (partition,) = response.topics[0].partitions
    assert partition.error_code == ErrorCode.none
    states = {p.producer_id: (p.producer_epoch, p.coordinator_epoch) for p in partition.active_producers}
    assert states[MARKER_PRODUCER_ID] == (3, 7)


def txn_offset_commit_sample(scene: Scene) -> dict[str, Any]:
    """A simple group's offset committed inside producer 7000's transaction (KIP-447 fields from v3)."""
    return {
        "transactional_id": f"txn-{scene.group}",
        "group_id": scene.group,
        "producer_id": 7000,
        "producer_epoch": 0,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": scene.topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 77,
                        "committed_leader_epoch": COMMITTED_EPOCH,
                        "committed_metadata": "in a transaction",
                    }
                ],
            }
        ],
    }


async def check_txn_offset_commit(scene: Scene, response: Any) -> None:
    """Accepted, and pending: a require_stable OffsetFetch v8 answers UNSTABLE_OFFSET_COMMIT, no offset."""
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    fetched = await scene.client.call(ApiKey.OFFSET_FETCH, 8, offset_fetch_sample(scene))
    partition = fetched.groups[0].topics[0].partitions[0]
    assert (partition.error_code, partition.committed_offset) == (ErrorCode.unstable_offset_commit, -1)


# -- share groups (KIP-932)

SHARE_MEMBER = "share-member-1"


def share_heartbeat_sample(scene: Scene) -> dict[str, Any]:
    """A share group join: epoch 0, a client-made member id, one subscribed topic."""
    return {
        "group_id": scene.group,
        "member_id": SHARE_MEMBER,
        "member_epoch": 0,
        "subscribed_topic_names": [scene.topic],
    }


async def check_share_heartbeat(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    assert response.member_epoch > 0
    assert [list(tp.partitions) for tp in response.assignment.topic_partitions] == [[0]]


async def share_group_join(scene: Scene) -> None:
    """The scene's topic and a share group with one member (ShareGroupHeartbeat v1)."""
    await create_topic(scene)
    joined = await scene.client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, share_heartbeat_sample(scene))
    assert joined.error_code == ErrorCode.none


async def check_share_group_describe(scene: Scene, response: Any) -> None:
    group, missing = response.groups
    assert (group.error_code, group.group_state, group.assignor_name) == (ErrorCode.none, "Stable", "simple")
    (member,) = group.members
    assert [(tp.topic_name, list(tp.partitions)) for tp in member.assignment.topic_partitions] == [
        (scene.topic, [0])
    ]
    assert missing.error_code == ErrorCode.group_id_not_found


async def share_backlog(scene: Scene) -> None:
    """The scene's topic with one record, its id in the scene, and the scene's share group reading
    from the earliest offset (group config ``share.auto.offset.reset``)."""
    await create_topic_with_one_record(scene)
    config = {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}
    altered = await scene.client.call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [{"resource_type": 32, "resource_name": scene.group, "configs": [config]}],
            "validate_only": False,
        },
    )
    assert altered.responses[0].error_code == ErrorCode.none
    metadata = await scene.client.call(
        ApiKey.METADATA,
        12,
        {
            "topics": [{"name": scene.topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    scene.topic_id = metadata.topics[0].topic_id


def share_fetch_sample(scene: Scene, epoch: int = 0) -> dict[str, Any]:
    return {
        "group_id": scene.group,
        "member_id": SHARE_MEMBER,
        "share_session_epoch": epoch,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 500,
        "batch_size": 500,
        "topics": [
            {
                "topic_id": scene.topic_id,
                "partitions": [{"partition_index": 0, "acknowledgement_batches": []}],
            }
        ],
        "forgotten_topics_data": [],
    }


async def check_share_fetch(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    (partition,) = response.responses[0].partitions
    assert partition.error_code == ErrorCode.none and partition.records
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in partition.acquired_records] == [
        (0, 0, 1)
    ]


async def share_fetch_one(scene: Scene) -> None:
    """The record of :func:`share_backlog`, acquired by the scene's share member (ShareFetch v1)."""
    await share_backlog(scene)
    fetched = await scene.client.call(ApiKey.SHARE_FETCH, 1, share_fetch_sample(scene))
    await check_share_fetch(scene, fetched)


def share_acknowledge_sample(scene: Scene) -> dict[str, Any]:
    """The first request after the session's opening fetch (epoch 1) accepts offset 0."""
    batch = {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}
    return {
        "group_id": scene.group,
        "member_id": SHARE_MEMBER,
        "share_session_epoch": 1,
        "topics": [
            {
                "topic_id": scene.topic_id,
                "partitions": [{"partition_index": 0, "acknowledgement_batches": [batch]}],
            }
        ],
    }


async def check_share_acknowledge(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.none]


async def share_group_consumed_one(scene: Scene) -> None:
    """:func:`share_fetch_one` and its acknowledgement, then the member leaves: an empty share group
    whose partition starts at offset 1."""
    await share_fetch_one(scene)
    acked = await scene.client.call(ApiKey.SHARE_ACKNOWLEDGE, 1, share_acknowledge_sample(scene))
    await check_share_acknowledge(scene, acked)
    joined = await scene.client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, share_heartbeat_sample(scene))
    assert joined.error_code == ErrorCode.none
    left = await scene.client.call(
        ApiKey.SHARE_GROUP_HEARTBEAT, 1, {**share_heartbeat_sample(scene), "member_epoch": -1}
    )
    assert left.error_code == ErrorCode.none


def describe_share_offsets_sample(scene: Scene) -> dict[str, Any]:
    return {"groups": [{"group_id": scene.group, "topics": [{"topic_name": scene.topic, "partitions": [0]}]}]}


async def check_describe_share_offsets(scene: Scene, response: Any) -> None:
    (group,) = response.groups
    assert group.error_code == ErrorCode.none
    (partition,) = group.topics[0].partitions
    assert (partition.error_code, partition.start_offset) == (ErrorCode.none, 1)
    if scene.version >= 1:
        assert partition.lag == 0


def alter_share_offsets_sample(scene: Scene) -> dict[str, Any]:
    """Back to offset 0 (reset to earliest)."""
    return {
        "group_id": scene.group,
        "topics": [{"topic_name": scene.topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}],
    }


async def check_alter_share_offsets(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.none]


def delete_share_offsets_sample(scene: Scene) -> dict[str, Any]:
    return {"group_id": scene.group, "topics": [{"topic_name": scene.topic}]}


async def check_delete_share_offsets(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    assert [t.error_code for t in response.responses] == [ErrorCode.none]


CASES: dict[int, Case] = {
    ApiKey.PRODUCE: Case(produce_sample, check_produce, create_topic),
    ApiKey.FETCH: Case(fetch_sample, check_fetch, create_topic_with_one_record),
    ApiKey.LIST_OFFSETS: Case(list_offsets_sample, check_list_offsets, create_topic_with_one_record),
    ApiKey.METADATA: Case(metadata_sample, check_metadata, create_topic),
    ApiKey.OFFSET_COMMIT: Case(commit_sample, check_offset_commit, create_topic),
    ApiKey.OFFSET_FETCH: Case(offset_fetch_sample, check_offset_fetch, commit_offset),
    ApiKey.TXN_OFFSET_COMMIT: Case(txn_offset_commit_sample, check_txn_offset_commit, create_topic),
    ApiKey.FIND_COORDINATOR: Case(find_coordinator_sample, check_find_coordinator),
    ApiKey.JOIN_GROUP: Case(join_sample, check_join_group),
    ApiKey.HEARTBEAT: Case(heartbeat_sample, check_error_none, join_and_sync),
    ApiKey.LEAVE_GROUP: Case(leave_sample, check_leave_group, join_and_sync),
    ApiKey.SYNC_GROUP: Case(sync_sample, check_sync_group, join),
    ApiKey.DESCRIBE_GROUPS: Case(describe_groups_sample, check_describe_groups, join_and_sync),
    ApiKey.LIST_GROUPS: Case(list_groups_sample, check_list_groups, join_sync_and_commit_for_an_empty_group),
    ApiKey.API_VERSIONS: Case(api_versions_sample, check_api_versions),
    ApiKey.CREATE_TOPICS: Case(create_topics_sample, check_create_topics),
    ApiKey.DELETE_TOPICS: Case(delete_topics_sample, check_delete_topics, create_topic),
    ApiKey.DELETE_RECORDS: Case(delete_records_sample, check_delete_records, create_topic_with_one_record),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Case(
        offset_for_leader_epoch_sample, check_offset_for_leader_epoch, create_topic_with_one_record
    ),
    ApiKey.INIT_PRODUCER_ID: Case(init_producer_id_sample, check_init_producer_id),
    ApiKey.WRITE_TXN_MARKERS: Case(
        write_txn_markers_sample, check_write_txn_markers, create_topic_with_one_record
    ),
    ApiKey.DESCRIBE_PRODUCERS: Case(describe_producers_sample, check_describe_producers, write_one_marker),
    ApiKey.DESCRIBE_CONFIGS: Case(describe_configs_sample, check_describe_configs, create_topic),
    ApiKey.CREATE_PARTITIONS: Case(create_partitions_sample, check_create_partitions, create_topic),
    ApiKey.DELETE_GROUPS: Case(delete_groups_sample, check_delete_groups, commit_offset),
    ApiKey.OFFSET_DELETE: Case(offset_delete_sample, check_offset_delete, commit_offset),
    ApiKey.DESCRIBE_CLUSTER: Case(describe_cluster_sample, check_describe_cluster),
    ApiKey.SASL_HANDSHAKE: Case(sasl_handshake_sample, check_sasl_on_plaintext_listener),
    ApiKey.SASL_AUTHENTICATE: Case(sasl_authenticate_sample, check_sasl_on_plaintext_listener),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Case(alter_scram_sample, check_alter_scram),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Case(
        describe_scram_sample, check_describe_scram, upsert_scram_user
    ),
    ApiKey.DESCRIBE_ACLS: Case(describe_acls_sample, check_describe_acls_disabled),
    ApiKey.CREATE_ACLS: Case(create_acls_sample, check_create_acls_disabled),
    ApiKey.DELETE_ACLS: Case(delete_acls_sample, check_delete_acls_disabled),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Case(consumer_heartbeat_sample, check_consumer_heartbeat, create_topic),
    ApiKey.ALTER_CONFIGS: Case(alter_configs_sample, check_alter_configs),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Case(incremental_alter_configs_sample, check_incremental_alter_configs),
    ApiKey.CONSUMER_GROUP_DESCRIBE: Case(
        consumer_group_describe_sample, check_consumer_group_describe, consumer_group_join
    ),
    ApiKey.SHARE_GROUP_HEARTBEAT: Case(share_heartbeat_sample, check_share_heartbeat, create_topic),
    ApiKey.SHARE_GROUP_DESCRIBE: Case(
        consumer_group_describe_sample, check_share_group_describe, share_group_join
    ),
    ApiKey.SHARE_FETCH: Case(share_fetch_sample, check_share_fetch, share_backlog),
    ApiKey.SHARE_ACKNOWLEDGE: Case(share_acknowledge_sample, check_share_acknowledge, share_fetch_one),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: Case(
        describe_share_offsets_sample, check_describe_share_offsets, share_group_consumed_one
    ),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: Case(
        alter_share_offsets_sample, check_alter_share_offsets, share_group_consumed_one
    ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: Case(
        delete_share_offsets_sample, check_delete_share_offsets, share_group_consumed_one
    ),
}
"""API key -> its round-trip case; every key ApiVersions advertises must have one."""

from tests.protocol.transaction_samples import TRANSACTION_CASES  # noqa: E402 (it builds on the above)

CASES.update(TRANSACTION_CASES)

WITHOUT_KIO_SCHEMA = {(ApiKey.PRODUCE, 0), (ApiKey.PRODUCE, 1), (ApiKey.PRODUCE, 2)}
"""Advertised versions kio has no schema for: kcoord closes the connection (Produce v0-2, magic 0/1)."""
