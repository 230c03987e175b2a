"""KIP-1222's renew acknowledgement over real sockets (ShareAcknowledge and ShareFetch v2): the record's
acquisition lock starts again, nothing else changes, and a renewing ShareFetch only acknowledges."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient
from tests.support.server import KcoordProcess
from tests.support.share_consumers import create_topic, produce_numbers

LOCK_MS = 4000
RENEW = 4
ACCEPT = 1


@pytest.fixture
def server(tmp_path: Path) -> Iterator[KcoordProcess]:
    kcoord = KcoordProcess(tmp_path / "data", {"group.share.record.lock.duration.ms": str(LOCK_MS)}).start()
    try:
        yield kcoord
    finally:
        kcoord.kill()


def _fetch(
    member: str, epoch: int, topic_id: uuid.UUID, *, wait_ms: int = 0, **overrides: Any
) -> dict[str, Any]:
    return {
        "group_id": "renewers",
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait": wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 100,
        "batch_size": 100,
        "share_acquire_mode": 0,
        "is_renew_ack": False,
        "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}
        ],
        "forgotten_topics_data": [],
        **overrides,
    }


def _ack(member: str, epoch: int, topic_id: uuid.UUID, first: int, last: int, kind: int) -> dict[str, Any]:
    batch = {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}
    return {
        "group_id": "renewers",
        "member_id": member,
        "share_session_epoch": epoch,
        "is_renew_ack": kind == RENEW,
        "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [batch]}]}
        ],
    }


def _acquired(response: Any) -> list[tuple[int, int, int]]:
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in response.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def _codes(response: Any) -> list[tuple[int, int]]:
    return [
        (p.error_code, getattr(p, "acknowledge_error_code", 0))
        for t in response.responses
        for p in t.partitions
    ]


async def _topic_id(client: AsyncRawClient, name: str) -> uuid.UUID:
    metadata = await client.call(
        ApiKey.METADATA,
        12,
        {
            "topics": [{"name": name, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    topic_id: uuid.UUID = metadata.topics[0].topic_id
    return topic_id


async def test_a_renewed_record_outlives_its_first_lock_and_the_others_do_not(server: KcoordProcess) -> None:
    """Member a holds offsets 0-2 and renews 0 halfway through the lock; when the lock runs out,
    member b (waiting in a long poll) gets 1-2 with delivery count 2 but not 0, which a still holds
    and accepts; a renewal needs v2 (INVALID_REQUEST in v1) and the answer gives the lock duration."""
    create_topic(server.bootstrap, "renewed")
    a = await AsyncRawClient.connect(server.port, "member-a")
    b = await AsyncRawClient.connect(server.port, "member-b")
    try:
        topic_id = await _topic_id(a, "renewed")
        await a.call(ApiKey.SHARE_FETCH, 2, _fetch("a", 0, topic_id))  # opens the sessions, starts at the end
        await b.call(ApiKey.SHARE_FETCH, 2, _fetch("b", 0, topic_id))
        produce_numbers(server.bootstrap, "renewed", 3)
        held = await a.call(ApiKey.SHARE_FETCH, 2, _fetch("a", 1, topic_id, wait_ms=5000))
        assert _acquired(held) == [(0, 2, 1)]
        await asyncio.sleep(LOCK_MS / 2000)  # halfway through the lock: what the renewal is for
        old = await a.call(ApiKey.SHARE_ACKNOWLEDGE, 1, _ack("a", 2, topic_id, 0, 0, RENEW))
        renewed = await a.call(ApiKey.SHARE_ACKNOWLEDGE, 2, _ack("a", 3, topic_id, 0, 0, RENEW))
        taken = await b.call(ApiKey.SHARE_FETCH, 2, _fetch("b", 1, topic_id, wait_ms=LOCK_MS * 2))
        accepted = await a.call(ApiKey.SHARE_ACKNOWLEDGE, 2, _ack("a", 4, topic_id, 0, 0, ACCEPT))
    finally:
        await a.close()
        await b.close()
    assert _codes(old) == [(ErrorCode.invalid_request, 0)]
    assert _codes(renewed) == [(ErrorCode.none, 0)]
    assert renewed.acquisition_lock_timeout.total_seconds() * 1000 == LOCK_MS
    assert _acquired(taken) == [(1, 2, 2)]
    assert _codes(accepted) == [(ErrorCode.none, 0)]


async def test_a_renewing_share_fetch_only_acknowledges(server: KcoordProcess) -> None:
    """A ShareFetch with ``is_renew_ack`` that asks for records is INVALID_REQUEST; one that asks for
    none renews, acquires nothing even though records wait, and the session goes on."""
    create_topic(server.bootstrap, "renew-fetch")
    client = await AsyncRawClient.connect(server.port, "renewer")
    try:
        topic_id = await _topic_id(client, "renew-fetch")
        await client.call(ApiKey.SHARE_FETCH, 2, _fetch("a", 0, topic_id))  # opens the session at the end
        produce_numbers(server.bootstrap, "renew-fetch", 2)
        first = await client.call(
            ApiKey.SHARE_FETCH, 2, _fetch("a", 1, topic_id, wait_ms=5000, max_records=1)
        )
        assert _acquired(first) == [(0, 0, 1)]
        renew_batch = {"first_offset": 0, "last_offset": 0, "acknowledge_types": [RENEW]}
        topics = [
            {
                "topic_id": topic_id,
                "partitions": [{"partition_index": 0, "acknowledgement_batches": [renew_batch]}],
            }
        ]
        asking = await client.call(
            ApiKey.SHARE_FETCH, 2, _fetch("a", 2, topic_id, is_renew_ack=True, topics=topics)
        )
        quiet = {"max_wait": 0, "min_bytes": 0, "max_bytes": 0, "max_records": 0}
        renewing = await client.call(
            ApiKey.SHARE_FETCH, 2, _fetch("a", 2, topic_id, is_renew_ack=True, topics=topics, **quiet)
        )
        after = await client.call(ApiKey.SHARE_FETCH, 2, _fetch("a", 3, topic_id, wait_ms=5000))
    finally:
        await client.close()
    assert asking.error_code == ErrorCode.invalid_request
    assert renewing.error_code == ErrorCode.none
    assert _codes(renewing) == [(ErrorCode.none, ErrorCode.none)]
    assert _acquired(renewing) == []
    assert _acquired(after) == [(1, 1, 1)]
