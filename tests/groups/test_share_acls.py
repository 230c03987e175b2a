"""Share groups under ACLs, over real sockets: Group READ on the share group for ShareGroupHeartbeat,
ShareFetch and ShareAcknowledge, Topic READ for ShareFetch, as Kafka 4.2 asks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient
from tests.support.server import KcoordProcess

ANONYMOUS, HOST = "User:ANONYMOUS", "127.0.0.1"
OPEN, CLOSED, GROUP = "sq-open", "sq-closed", "sq-group"
TIMEOUT_S = 30.0


def _acls() -> list[AclBinding]:
    allow, literal = AclPermissionType.ALLOW, ResourcePatternType.LITERAL
    return [
        AclBinding(ResourceType.BROKER, "kafka-cluster", literal, ANONYMOUS, HOST, AclOperation.ALL, allow),
        AclBinding(ResourceType.TOPIC, OPEN, literal, ANONYMOUS, HOST, AclOperation.ALL, allow),
        AclBinding(ResourceType.TOPIC, CLOSED, literal, ANONYMOUS, HOST, AclOperation.DESCRIBE, allow),
        AclBinding(ResourceType.GROUP, GROUP, literal, ANONYMOUS, HOST, AclOperation.READ, allow),
    ]


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[KcoordProcess]:
    """ACLs and topics made while everything is allowed, then enforced after a restart."""
    data_dir = tmp_path / "data"
    settings = {"authorizer.class.name": "kcoord.security.StandardAuthorizer"}
    bootstrapping = KcoordProcess(data_dir, {**settings, "allow.everyone.if.no.acl.found": "true"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrapping.bootstrap})
        for future in admin.create_acls(_acls(), request_timeout=TIMEOUT_S).values():
            future.result(TIMEOUT_S)
        for future in admin.create_topics([NewTopic(OPEN, 1, 1), NewTopic(CLOSED, 1, 1)]).values():
            future.result(TIMEOUT_S)
    finally:
        assert bootstrapping.terminate() == 0
    server = KcoordProcess(data_dir, {**settings, "allow.everyone.if.no.acl.found": "false"}).start()
    try:
        yield server
    finally:
        server.kill()


async def _topic_ids(client: AsyncRawClient) -> dict[str, Any]:
    body = {
        "topics": [{"name": name, "topic_id": None} for name in (OPEN, CLOSED)],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    metadata = await client.call(ApiKey.METADATA, 12, body)
    return {t.name: t.topic_id for t in metadata.topics}


def _fetch_body(group: str, topic_ids: list[Any]) -> dict[str, Any]:
    return {
        "group_id": group,
        "member_id": "member-1",
        "share_session_epoch": 0,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 100,
        "batch_size": 100,
        "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}
            for topic_id in topic_ids
        ],
        "forgotten_topics_data": [],
    }


async def test_share_apis_need_group_read_and_share_fetch_needs_topic_read(secured: KcoordProcess) -> None:
    """Without Group READ: ShareGroupHeartbeat, ShareFetch and ShareAcknowledge are
    GROUP_AUTHORIZATION_FAILED; with it, ShareFetch answers TOPIC_AUTHORIZATION_FAILED for the topic
    the principal may only DESCRIBE and serves the one it may READ."""
    client = await AsyncRawClient.connect(secured.port, "share-acl-test")
    try:
        ids = await _topic_ids(client)
        beat = {"member_id": "member-1", "member_epoch": 0, "subscribed_topic_names": [OPEN]}
        refused_beat = await client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {**beat, "group_id": "other"})
        joined = await client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {**beat, "group_id": GROUP})
        refused_fetch = await client.call(ApiKey.SHARE_FETCH, 1, _fetch_body("other", [ids[OPEN]]))
        refused_ack = await client.call(
            ApiKey.SHARE_ACKNOWLEDGE,
            1,
            {"group_id": "other", "member_id": "member-1", "share_session_epoch": 1, "topics": []},
        )
        fetched = await client.call(ApiKey.SHARE_FETCH, 1, _fetch_body(GROUP, [ids[OPEN], ids[CLOSED]]))
    finally:
        await client.close()
    assert refused_beat.error_code == ErrorCode.group_authorization_failed
    assert joined.error_code == ErrorCode.none and joined.member_epoch > 0
    assert refused_fetch.error_code == ErrorCode.group_authorization_failed
    assert refused_ack.error_code == ErrorCode.group_authorization_failed
    assert fetched.error_code == ErrorCode.none
    codes = {t.topic_id: [p.error_code for p in t.partitions] for t in fetched.responses}
    assert codes == {ids[OPEN]: [ErrorCode.none], ids[CLOSED]: [ErrorCode.topic_authorization_failed]}
