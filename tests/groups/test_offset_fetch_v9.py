"""OffsetFetch v9 over a real socket: a consumer group member's id and epoch are checked as Kafka
checks them (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); admin fetches (no member, epoch -1) pass."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess

TOPIC, GROUP = "fetched", "g-fetch-v9"


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawClient]:
    server = KcoordProcess(tmp_path / "data").start()
    try:
        with RawClient(server.host, server.port) as client:
            yield client
    finally:
        server.kill()


def _create_topic(raw: RawClient) -> None:
    topic = {"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    response = raw.call(ApiKey.CREATE_TOPICS, 4, {"topics": [topic], "timeout": 10_000})
    assert response.topics[0].error_code == ErrorCode.none


def _join(raw: RawClient) -> tuple[str, int]:
    member_id = str(uuid.uuid4())
    body = {
        "group_id": GROUP,
        "member_id": member_id,
        "member_epoch": 0,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": [TOPIC],
        "topic_partitions": [],
    }
    response = raw.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)
    assert response.error_code == ErrorCode.none
    return member_id, int(response.member_epoch)


def _commit(raw: RawClient, member_id: str, epoch: int) -> None:
    partition = {
        "partition_index": 0,
        "committed_offset": 42,
        "committed_leader_epoch": -1,
        "committed_metadata": "",
    }
    body = {
        "group_id": GROUP,
        "generation_id_or_member_epoch": epoch,
        "member_id": member_id,
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [{"name": TOPIC, "partitions": [partition]}],
    }
    response = raw.call(ApiKey.OFFSET_COMMIT, 9, body)
    assert response.topics[0].partitions[0].error_code == ErrorCode.none


def _fetch(raw: RawClient, member_id: str | None, epoch: int) -> Any:
    group = {
        "group_id": GROUP,
        "member_id": member_id,
        "member_epoch": epoch,
        "topics": [{"name": TOPIC, "partition_indexes": [0]}],
    }
    (answer,) = raw.call(ApiKey.OFFSET_FETCH, 9, {"groups": [group], "require_stable": True}).groups
    return answer


def test_member_fetch_is_checked_against_the_members_epoch(raw: RawClient) -> None:
    _create_topic(raw)
    member_id, epoch = _join(raw)
    _commit(raw, member_id, epoch)

    current = _fetch(raw, member_id, epoch)
    assert current.error_code == ErrorCode.none
    assert current.topics[0].partitions[0].committed_offset == 42

    admin = _fetch(raw, None, -1)
    assert (admin.error_code, admin.topics[0].partitions[0].committed_offset) == (ErrorCode.none, 42)

    assert _fetch(raw, member_id, epoch + 1).error_code == ErrorCode.stale_member_epoch
    assert _fetch(raw, member_id, epoch - 1).error_code == ErrorCode.stale_member_epoch
    assert _fetch(raw, "someone-else", epoch).error_code == ErrorCode.unknown_member_id


def test_unknown_group_answers_no_offsets(raw: RawClient) -> None:
    _create_topic(raw)
    group = {
        "group_id": "never-seen",
        "member_id": "m",
        "member_epoch": 3,
        "topics": [{"name": TOPIC, "partition_indexes": [0]}],
    }
    (answer,) = raw.call(ApiKey.OFFSET_FETCH, 9, {"groups": [group], "require_stable": False}).groups
    assert answer.error_code == ErrorCode.none
    assert answer.topics[0].partitions[0].committed_offset == -1
