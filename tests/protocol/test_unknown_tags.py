"""Unknown tagged fields in a request are skipped, as Kafka's readers skip them, and the guard and the
decoder agree: the request decodes to exactly what it says without them."""

from __future__ import annotations

from typing import Any

import pytest

from kcoord.protocol.codec import build, decode_request, encode_entity, request_class
from kcoord.protocol.guard import MalformedRequestError, check_request
from kcoord.protocol.varint import encode_uvarint
from tests.support.hostile_frames import request_payload

HEARTBEAT, JOIN_GROUP, FETCH = 12, 11, 1


def tagged(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section holding ``(tag, payload)`` fields in order."""
    return encode_uvarint(len(fields)) + b"".join(
        encode_uvarint(tag) + encode_uvarint(len(data)) + data for tag, data in fields
    )


UNKNOWN = tagged((7, b"newer"), (300, b"x" * 200), (301, b""))
"""Three tags no request schema knows: a short payload, a two-byte tag with a 200-byte payload, an
empty one."""


def body(api_key: int, version: int, fields: dict[str, Any]) -> bytes:
    cls = request_class(api_key, version)
    assert cls is not None
    return encode_entity(build(cls, fields))


def with_header_tags(api_key: int, version: int, body_bytes: bytes, section: bytes) -> bytes:
    """The request payload with ``section`` as the request header's tagged fields."""
    plain = request_payload(api_key, version, body_bytes)
    header_end = len(plain) - len(body_bytes)
    assert plain[header_end - 1 : header_end] == b"\x00"
    return plain[: header_end - 1] + section + body_bytes


def test_unknown_tags_in_the_header_and_the_body_are_skipped() -> None:
    """Heartbeat v4 with unknown tags after the header and at the end of the body decodes as without them."""
    plain_body = body(HEARTBEAT, 4, {"group_id": "g", "generation_id": 3, "member_id": "m"})
    assert plain_body.endswith(b"\x00")
    expected = decode_request(request_payload(HEARTBEAT, 4, plain_body))
    extended = with_header_tags(HEARTBEAT, 4, plain_body[:-1] + UNKNOWN, UNKNOWN)
    assert decode_request(extended) == expected


def test_unknown_tags_in_array_items_are_skipped() -> None:
    """JoinGroup v9 with unknown tags inside each protocol item and the body decodes as without them."""
    fields = {
        "group_id": "g",
        "session_timeout": 10_000,
        "rebalance_timeout": 30_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"m1"}, {"name": "roundrobin", "metadata": b""}],
        "reason": None,
    }
    plain_body = body(JOIN_GROUP, 9, fields)
    expected = decode_request(request_payload(JOIN_GROUP, 9, plain_body))
    first, second = b"\x06range\x03m1\x00", b"\x0broundrobin\x01\x00"
    assert first in plain_body and second in plain_body and plain_body.endswith(b"\x00")
    extended = (
        plain_body.replace(first, first[:-1] + UNKNOWN).replace(second, second[:-1] + tagged((9, b"z")))[:-1]
        + UNKNOWN
    )
    assert decode_request(request_payload(JOIN_GROUP, 9, extended)) == expected


def test_known_tags_beside_unknown_ones_are_kept() -> None:
    """Fetch v12's known cluster_id tag (0) survives between unknown tags around it."""
    fields = {
        "replica_id": -1,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [],
        "forgotten_topics_data": [],
        "rack_id": "",
        "cluster_id": None,
    }
    plain_body = body(FETCH, 12, fields)
    assert plain_body.endswith(b"\x00")
    cluster_id = b"\x04abc"  # compact string "abc"
    extended = plain_body[:-1] + tagged((0, cluster_id), (5, b"later"), (40, b"\x00\x01"))
    _, request = decode_request(request_payload(FETCH, 12, extended))
    _, reference = decode_request(request_payload(FETCH, 12, plain_body[:-1] + tagged((0, cluster_id))))
    assert request == reference and request.cluster_id == "abc"


def test_an_unknown_tag_that_overruns_the_frame_is_still_refused() -> None:
    """Skipping is for well-formed fields: an unknown tag declaring more bytes than remain is refused."""
    cls = request_class(HEARTBEAT, 4)
    plain_body = body(HEARTBEAT, 4, {"group_id": "g", "generation_id": 3, "member_id": "m"})
    overrun = plain_body[:-1] + b"\x01\x07\x10short"
    with pytest.raises(MalformedRequestError, match="tag 7: declares 16 bytes"):
        check_request(cls, request_payload(HEARTBEAT, 4, overrun))


def test_a_refused_frame_leaves_nothing_behind_for_the_next_one() -> None:
    """A frame refused after an unknown tag was seen does not change how the next frame decodes."""
    cls = request_class(JOIN_GROUP, 9)
    fields = {
        "group_id": "g",
        "session_timeout": 10_000,
        "rebalance_timeout": 30_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"m1"}],
    }
    plain_body = body(JOIN_GROUP, 9, fields)
    item = b"\x06range\x03m1\x00"
    broken = plain_body.replace(item, item[:-1] + UNKNOWN)[:-1] + b"\x01\x07\x7f"
    with pytest.raises(MalformedRequestError):
        check_request(cls, request_payload(JOIN_GROUP, 9, broken))
    payload = request_payload(JOIN_GROUP, 9, plain_body)
    assert check_request(cls, payload) is payload
