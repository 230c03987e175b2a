"""ShareFetch and ShareAcknowledge refuse bad requests with Kafka's error codes over real sockets:
session epochs out of order, acknowledgements of records the member does not hold, unknown topics."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient
from tests.support.server import KcoordProcess
from tests.support.share_consumers import create_topic, produce_numbers


def _fetch(epoch: int, topic_id: uuid.UUID, acks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "group_id": "raw",
        "member_id": "raw-member",
        "share_session_epoch": epoch,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 100,
        "batch_size": 100,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [{"partition_index": 0, "acknowledgement_batches": acks or []}],
            }
        ],
        "forgotten_topics_data": [],
    }


def _ack(epoch: int, topic_id: uuid.UUID, first: int, last: int, kind: int) -> dict[str, Any]:
    batch = {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}
    return {
        "group_id": "raw",
        "member_id": "raw-member",
        "share_session_epoch": epoch,
        "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [batch]}]}
        ],
    }


def _codes(response: Any) -> list[tuple[int, int]]:
    return [
        (p.error_code, getattr(p, "acknowledge_error_code", 0))
        for t in response.responses
        for p in t.partitions
    ]


async def test_bad_share_requests_get_kafka_error_codes(kcoord: KcoordProcess) -> None:
    """Epoch 3 on a new session: SHARE_SESSION_NOT_FOUND; ShareAcknowledge may not open a session
    (INVALID_SHARE_SESSION_EPOCH); a skipped epoch is INVALID_SHARE_SESSION_EPOCH; acknowledging an
    offset the member does not hold is INVALID_RECORD_STATE, a renew (type 4) INVALID_REQUEST in v1; an
    unknown topic id is UNKNOWN_TOPIC_ID; an empty member id INVALID_REQUEST; the session still works
    afterwards and the server logs no error."""
    create_topic(kcoord.bootstrap, "raw-queue")
    client = await AsyncRawClient.connect(kcoord.port, "share-errors")
    try:
        metadata = await client.call(
            ApiKey.METADATA,
            12,
            {
                "topics": [{"name": "raw-queue", "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        topic_id = metadata.topics[0].topic_id
        not_found = await client.call(ApiKey.SHARE_FETCH, 1, _fetch(3, topic_id))
        ack_opens = await client.call(ApiKey.SHARE_ACKNOWLEDGE, 1, _ack(0, topic_id, 0, 0, 1))
        opened = await client.call(ApiKey.SHARE_FETCH, 1, _fetch(0, topic_id))
        skipped = await client.call(ApiKey.SHARE_FETCH, 1, _fetch(5, topic_id))
        produce_numbers(kcoord.bootstrap, "raw-queue", 3)
        fetched = await client.call(ApiKey.SHARE_FETCH, 1, _fetch(1, topic_id))
        foreign = await client.call(ApiKey.SHARE_ACKNOWLEDGE, 1, _ack(2, topic_id, 7, 7, 1))
        renew = await client.call(ApiKey.SHARE_ACKNOWLEDGE, 1, _ack(3, topic_id, 0, 0, 4))
        accepted = await client.call(ApiKey.SHARE_ACKNOWLEDGE, 1, _ack(4, topic_id, 0, 2, 1))
        unknown = await client.call(ApiKey.SHARE_FETCH, 1, _fetch(5, uuid.UUID(int=12345)))
        nameless = await client.call(ApiKey.SHARE_FETCH, 1, {**_fetch(0, topic_id), "member_id": ""})
    finally:
        await client.close()
    assert not_found.error_code == ErrorCode.share_session_not_found
    assert ack_opens.error_code == ErrorCode.invalid_share_session_epoch
    assert opened.error_code == ErrorCode.none
    assert skipped.error_code == ErrorCode.invalid_share_session_epoch
    assert fetched.error_code == ErrorCode.none
    acquired = [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in fetched.responses
        for p in t.partitions
        for a in p.acquired_records
    ]
    assert acquired == [(0, 2, 1)]
    assert _codes(foreign) == [(ErrorCode.invalid_record_state, 0)]
    assert _codes(renew) == [(ErrorCode.invalid_request, 0)]
    assert _codes(accepted) == [(ErrorCode.none, 0)]
    by_topic = {t.topic_id: [p.error_code for p in t.partitions] for t in unknown.responses}
    assert nameless.error_code == ErrorCode.invalid_request
    assert by_topic == {uuid.UUID(int=12345): [ErrorCode.unknown_topic_id], topic_id: [ErrorCode.none]}
