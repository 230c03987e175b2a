"""ACLs over real sockets with the authorizer on: confluent-kafka's AdminClient manages them, they
apply at once and survive a restart, and a stranger can neither join, evict, commit, delete a
group nor delete a topic.

Until SASL lands on this branch every connection is ``User:ANONYMOUS``, so the tests tell the
owner from the stranger the way Kafka's ACLs can: by host. The owner (confluent-kafka, and raw
requests from 127.0.0.1) is granted ACLs for host 127.0.0.1; the stranger connects from 127.0.0.2
(still loopback) where no ACL grants anything. Super users and per-user ACLs need an
authenticated principal and are covered by the authorizer's unit tests (tests/security) until then.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol import request_samples as samples
from tests.protocol.in_process import AsyncRawClient
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

OWNER_HOST = "127.0.0.1"
STRANGER_HOST = "127.0.0.2"
ANONYMOUS = "User:ANONYMOUS"
TOPIC = "acl-orders"
GROUP = "acl-billing"
TIMEOUT_S = 30.0


def owner_acls() -> list[AclBinding]:
    """Everything on the cluster and on ``acl-`` topics and groups, for ANONYMOUS from the owner's host."""
    allow, everything = AclPermissionType.ALLOW, AclOperation.ALL
    prefixed, literal = ResourcePatternType.PREFIXED, ResourcePatternType.LITERAL
    return [
        AclBinding(ResourceType.BROKER, "kafka-cluster", literal, ANONYMOUS, OWNER_HOST, everything, allow),
        AclBinding(ResourceType.TOPIC, "acl-", prefixed, ANONYMOUS, OWNER_HOST, everything, allow),
        AclBinding(ResourceType.GROUP, "acl-", prefixed, ANONYMOUS, OWNER_HOST, everything, allow),
    ]


def every_acl() -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def admin(server: KcoordProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap})


def create_acls(server: KcoordProcess, bindings: list[AclBinding]) -> None:
    client = admin(server)
    for future in client.create_acls(bindings, request_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)


def described(server: KcoordProcess) -> set[tuple[Any, ...]]:
    client = admin(server)
    bindings = client.describe_acls(every_acl(), request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    return {_key(b) for b in bindings}


def _key(b: AclBinding) -> tuple[Any, ...]:
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[KcoordProcess]:
    """A server with the authorizer on whose owner ACLs were made with AdminClient, then restarted with
    ``allow.everyone.if.no.acl.found=false``: the ACLs it enforces are the ones that survived."""
    data_dir = tmp_path / "data"
    settings = {
        "authorizer.class.name": "kcoord.security.StandardAuthorizer",
        "auto.create.topics.enable": "false",
    }
    bootstrapping = KcoordProcess(data_dir, {**settings, "allow.everyone.if.no.acl.found": "true"}).start()
    try:
        create_acls(bootstrapping, owner_acls())
        client = admin(bootstrapping)
        for future in client.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(TIMEOUT_S)
    finally:
        assert bootstrapping.terminate() == 0
    server = KcoordProcess(data_dir, {**settings, "allow.everyone.if.no.acl.found": "false"}).start()
    try:
        yield server
    finally:
        server.kill()


def consumer(server: KcoordProcess, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 30000,
        }
    )


def join(server: KcoordProcess, group: str) -> Consumer:
    """A confluent-kafka member of ``group`` with its assignment."""
    member = consumer(server, group)
    member.subscribe([TOPIC])
    deadline = time.monotonic() + TIMEOUT_S
    while not member.assignment():
        assert time.monotonic() < deadline, "the owner's consumer was not assigned"
        message = member.poll(0.2)
        assert message is None or not message.error(), message.error()
    return member


def first_error(member: Consumer) -> KafkaError:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        message = member.poll(0.2)
        if message is not None and message.error():
            error: KafkaError = message.error()
            return error
    raise AssertionError("the consumer saw no error")


async def connect_from(host: str, port: int) -> AsyncRawClient:
    reader, writer = await asyncio.open_connection(OWNER_HOST, port, local_addr=(host, 0))
    return AsyncRawClient(reader, writer, "acl-test")


def test_acls_made_with_admin_client_survive_a_restart(secured: KcoordProcess) -> None:
    """DescribeAcls after the restart returns exactly what AdminClient created before it."""
    assert described(secured) == {_key(b) for b in owner_acls()}


def test_a_principal_without_group_read_gets_group_authorization_failed(secured: KcoordProcess) -> None:
    """librdkafka joining a group no ACL opens to it fails with GROUP_AUTHORIZATION_FAILED."""
    member = consumer(secured, "closed-group")
    try:
        member.subscribe([TOPIC])
        assert first_error(member).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        member.close()


async def test_a_stranger_can_neither_evict_commit_delete_nor_delete_a_topic(secured: KcoordProcess) -> None:
    """From a host without ACLs: JoinGroup, LeaveGroup of the live member, OffsetCommit, DeleteGroups,
    DescribeGroups are GROUP_AUTHORIZATION_FAILED, DeleteTopics is TOPIC_AUTHORIZATION_FAILED, Metadata
    shows no topic, and the owner's member, group and topic are untouched."""
    member = await asyncio.to_thread(join, secured, GROUP)
    try:
        owner = await connect_from(OWNER_HOST, secured.port)
        stranger = await connect_from(STRANGER_HOST, secured.port)
        described_group = await owner.call(
            ApiKey.DESCRIBE_GROUPS, 5, {"groups": [GROUP], "include_authorized_operations": True}
        )
        (member_id,) = [m.member_id for m in described_group.groups[0].members]
        read_describe_delete = (1 << 3) | (1 << 8) | (1 << 6)
        assert described_group.groups[0].authorized_operations == read_describe_delete

        joined = await stranger.call(ApiKey.JOIN_GROUP, 5, _join_body())
        left = await stranger.call(
            ApiKey.LEAVE_GROUP, 3, {"group_id": GROUP, "members": [{"member_id": member_id}]}
        )
        committed = await stranger.call(ApiKey.OFFSET_COMMIT, 8, _commit_body(member_id))
        deleted_group = await stranger.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP]})
        stranger_view = await stranger.call(
            ApiKey.DESCRIBE_GROUPS, 5, {"groups": [GROUP], "include_authorized_operations": False}
        )
        deleted_topic = await stranger.call(
            ApiKey.DELETE_TOPICS, 4, {"topic_names": [TOPIC], "timeout": 5000}
        )
        metadata = await stranger.call(ApiKey.METADATA, 9, _all_topics())

        assert joined.error_code == ErrorCode.group_authorization_failed
        assert left.error_code == ErrorCode.group_authorization_failed
        assert committed.topics[0].partitions[0].error_code == ErrorCode.group_authorization_failed
        assert deleted_group.results[0].error_code == ErrorCode.group_authorization_failed
        assert stranger_view.groups[0].error_code == ErrorCode.group_authorization_failed
        assert stranger_view.groups[0].members == ()
        assert deleted_topic.responses[0].error_code == ErrorCode.topic_authorization_failed
        assert metadata.topics == ()

        after = await owner.call(
            ApiKey.DESCRIBE_GROUPS, 5, {"groups": [GROUP], "include_authorized_operations": False}
        )
        assert (after.groups[0].group_state, [m.member_id for m in after.groups[0].members]) == (
            "Stable",
            [member_id],
        )
        owner_metadata = await owner.call(ApiKey.METADATA, 9, _all_topics())
        assert [t.name for t in owner_metadata.topics] == [TOPIC]
        await owner.close()
        await stranger.close()
    finally:
        await asyncio.to_thread(member.close)


def _describe_group_configs_sample(scene: samples.Scene) -> dict[str, Any]:
    return {
        "resources": [{"resource_type": 32, "resource_name": scene.group, "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }


GROUP_DENIED, TOPIC_DENIED = ErrorCode.group_authorization_failed, ErrorCode.topic_authorization_failed
REFUSALS: list[tuple[ApiKey, int, samples.Sample, ErrorCode]] = [
    (ApiKey.FIND_COORDINATOR, 3, samples.find_coordinator_sample, GROUP_DENIED),
    (ApiKey.HEARTBEAT, 4, samples.heartbeat_sample, GROUP_DENIED),
    (ApiKey.SYNC_GROUP, 5, samples.sync_sample, GROUP_DENIED),
    (ApiKey.OFFSET_FETCH, 7, samples.offset_fetch_sample, GROUP_DENIED),
    (ApiKey.OFFSET_FETCH, 8, samples.offset_fetch_sample, GROUP_DENIED),
    (ApiKey.OFFSET_DELETE, 0, samples.offset_delete_sample, GROUP_DENIED),
    (ApiKey.PRODUCE, 9, samples.produce_sample, TOPIC_DENIED),
    (ApiKey.FETCH, 12, samples.fetch_sample, TOPIC_DENIED),
    (ApiKey.LIST_OFFSETS, 7, samples.list_offsets_sample, TOPIC_DENIED),
    (ApiKey.CREATE_PARTITIONS, 3, samples.create_partitions_sample, TOPIC_DENIED),
    (ApiKey.DESCRIBE_CONFIGS, 4, samples.describe_configs_sample, TOPIC_DENIED),
    (ApiKey.DESCRIBE_CONFIGS, 4, _describe_group_configs_sample, GROUP_DENIED),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, samples.incremental_alter_configs_sample, GROUP_DENIED),
    (ApiKey.INIT_PRODUCER_ID, 4, samples.init_producer_id_sample, ErrorCode.cluster_authorization_failed),
    (ApiKey.DESCRIBE_ACLS, 3, samples.describe_acls_sample, ErrorCode.cluster_authorization_failed),
    (ApiKey.CREATE_ACLS, 3, samples.create_acls_sample, ErrorCode.cluster_authorization_failed),
    (ApiKey.DELETE_ACLS, 3, samples.delete_acls_sample, ErrorCode.cluster_authorization_failed),
]


async def test_every_other_api_refuses_the_stranger(secured: KcoordProcess) -> None:
    """From a host without ACLs each group, topic and cluster API answers its authorization error and
    ListGroups lists nothing, while the owner's ListGroups shows the group; DescribeCluster, which
    Kafka 4 answers everyone, answers the stranger too."""
    member = await asyncio.to_thread(join, secured, GROUP)
    try:
        stranger = await connect_from(STRANGER_HOST, secured.port)
        owner = await connect_from(OWNER_HOST, secured.port)
        scene = samples.Scene(stranger, 0, secured.port, 1, TOPIC, GROUP, "m-1", 1)
        for api_key, version, sample, expected in REFUSALS:
            scene.version = version
            response = await stranger.call(api_key, version, sample(scene))
            assert _codes(response) == {expected}, (api_key.name, version, response)
        scene.version = 1
        cluster = await stranger.call(ApiKey.DESCRIBE_CLUSTER, 1, samples.describe_cluster_sample(scene))
        assert (cluster.error_code, [b.port for b in cluster.brokers]) == (ErrorCode.none, [secured.port])
        listed = await stranger.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        owner_listed = await owner.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        assert listed.groups == ()
        assert [g.group_id for g in owner_listed.groups] == [GROUP]
        await stranger.close()
        await owner.close()
    finally:
        await asyncio.to_thread(member.close)


def _codes(value: Any) -> set[ErrorCode]:
    """Every non-zero error code anywhere in a decoded response."""
    found: set[ErrorCode] = set()
    if isinstance(value, tuple):
        for item in value:
            found |= _codes(item)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            field_value = getattr(value, name)
            if name == "error_code" and field_value != ErrorCode.none:
                found.add(ErrorCode(field_value))
            else:
                found |= _codes(field_value)
    return found


async def test_acl_changes_apply_at_once(secured: KcoordProcess) -> None:
    """An ACL created with AdminClient opens the topic to the stranger's next request; deleting it
    closes it again, both without a restart."""
    stranger = await connect_from(STRANGER_HOST, secured.port)
    topic_read = AclBinding(
        ResourceType.TOPIC,
        TOPIC,
        ResourcePatternType.LITERAL,
        ANONYMOUS,
        STRANGER_HOST,
        AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )
    before = await stranger.call(ApiKey.METADATA, 9, _all_topics())
    await asyncio.to_thread(create_acls, secured, [topic_read])
    granted = await stranger.call(ApiKey.METADATA, 9, _all_topics())
    topic_acls = AclBindingFilter(
        ResourceType.TOPIC,
        TOPIC,
        ResourcePatternType.LITERAL,
        None,
        STRANGER_HOST,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    client = admin(secured)
    deletions = client.delete_acls([topic_acls], request_timeout=TIMEOUT_S)
    removed = await asyncio.to_thread(deletions[topic_acls].result, TIMEOUT_S)
    revoked = await stranger.call(ApiKey.METADATA, 9, _all_topics())
    await stranger.close()

    assert before.topics == ()
    assert [t.name for t in granted.topics] == [TOPIC]
    assert [_key(b) for b in removed] == [_key(topic_read)]
    assert revoked.topics == ()


def test_produce_needs_topic_write(secured: KcoordProcess) -> None:
    """librdkafka's idempotent producer writes to a topic its host may WRITE to."""
    producer = Producer({"bootstrap.servers": secured.bootstrap, "enable.idempotence": True})
    errors: list[KafkaError] = []
    producer.produce(TOPIC, b"paid", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == [None]


def _join_body() -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "session_timeout": 30000,
        "rebalance_timeout": 30000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }


def _commit_body(member_id: str) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "generation_id_or_member_epoch": 1,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 42,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }


def _all_topics() -> dict[str, Any]:
    return {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
