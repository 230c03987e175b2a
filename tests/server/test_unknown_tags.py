"""Requests carrying tagged fields kcoord does not know (a newer client's) are answered normally over a
real socket, as Kafka answers them, and the connection stays open."""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.codec import build, encode_entity, request_class
from tests.protocol.test_unknown_tags import UNKNOWN, tagged, with_header_tags
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess

HEARTBEAT, JOIN_GROUP, METADATA = 12, 11, 3


def call_raw(client: RawClient, api_key: int, version: int, payload: bytes) -> Any:
    """Send a hand-made request payload; the decoded response (its correlation id checked)."""
    (correlation_id,) = struct.unpack_from(">i", payload, 4)
    client.send_raw(struct.pack(">i", len(payload)) + payload)
    return client.recv(api_key, version, correlation_id)


def payload_with_unknown_tags(api_key: int, version: int, fields: dict[str, Any], item: bytes = b"") -> bytes:
    """The request with unknown tags after the header, at the end of the body and (when ``item``, the
    encoded bytes of one array item ending in its empty tagged section, is given) inside that item."""
    cls = request_class(api_key, version)
    assert cls is not None
    encoded = encode_entity(build(cls, fields))
    assert encoded.endswith(b"\x00")
    if item:
        assert item in encoded and item.endswith(b"\x00")
        encoded = encoded.replace(item, item[:-1] + tagged((11, b"in-item")))
    return with_header_tags(api_key, version, encoded[:-1] + UNKNOWN, UNKNOWN)


def test_group_requests_with_unknown_tags_are_answered(shared_kcoord: KcoordProcess) -> None:
    """JoinGroup v9 (unknown tags in a protocol item too) and Heartbeat v4 get their usual answers, and a
    plain request on the same connection after them is answered as well."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        join = payload_with_unknown_tags(
            JOIN_GROUP,
            9,
            {
                "group_id": "unknown-tags-group",
                "session_timeout": 10_000,
                "rebalance_timeout": 10_000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
            item=b"\x06range\x01\x00",
        )
        joined = call_raw(client, JOIN_GROUP, 9, join)
        assert joined.error_code == ErrorCode.member_id_required and joined.member_id
        beat = payload_with_unknown_tags(
            HEARTBEAT, 4, {"group_id": "unknown-tags-group", "generation_id": 1, "member_id": "nobody"}
        )
        assert call_raw(client, HEARTBEAT, 4, beat).error_code == ErrorCode.unknown_member_id
        plain = client.call(
            HEARTBEAT, 4, {"group_id": "unknown-tags-group", "generation_id": 1, "member_id": "x"}
        )
        assert plain.error_code == ErrorCode.unknown_member_id


def test_metadata_with_unknown_tags_in_a_topic_entry_is_answered(shared_kcoord: KcoordProcess) -> None:
    """Metadata v12 with unknown tags in a topic entry lists the broker and answers for the topic."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        request = payload_with_unknown_tags(
            METADATA,
            12,
            {
                "topics": [{"topic_id": None, "name": "no-such-topic-here"}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
            item=b"\x13no-such-topic-here\x00",
        )
        answer = call_raw(client, METADATA, 12, request)
        assert [broker.port for broker in answer.brokers] == [shared_kcoord.port]
        assert [(t.name, t.error_code) for t in answer.topics] == [
            ("no-such-topic-here", ErrorCode.unknown_topic_or_partition)
        ]
        assert not client.is_closed_by_server(timeout=0.2)
