"""Request frames found to crash or wedge kcoord before its guard, shared by the tests and the fuzz bench.

Each is a header of the API's schema (v2 with empty tagged fields for flexible versions, else v1) and
a body of a few bytes. The first group made kio's native reader ask for tens of gigabytes and abort
the process; the second decoded with a null where the schema allows none and raised in handlers.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kcoord.protocol.codec import request_class


class HostileFrame(NamedTuple):
    name: str
    api_key: int
    version: int
    body: bytes


HUGE_COMPACT_ARRAY = bytes.fromhex("feffffff0f")
"""A compact array length of 2^32 - 2 items (the varint of 2^32 - 1)."""

ALLOCATION_BOMBS = (
    HostileFrame("offset-fetch-v6-fuzz", 9, 6, bytes.fromhex("01ffffffff31abe6feb9bb4c")),
    HostileFrame("find-coordinator-v4-fuzz", 10, 4, bytes.fromhex("01ffffffff59e497f1d3")),
    # JoinGroup v9: group, session timeout, rebalance timeout, member, instance (null), protocol type,
    # then the protocols array.
    HostileFrame(
        "join-group-v9-huge-array",
        11,
        9,
        b"\x02g" + b"\x00\x00\x27\x10" * 2 + b"\x01\x00\x09consumer" + HUGE_COMPACT_ARRAY,
    ),
    HostileFrame("metadata-v12-huge-array", 3, 12, HUGE_COMPACT_ARRAY),
    # OffsetCommit v8: group, generation, member, instance (null), then the topics array.
    HostileFrame("offset-commit-v8-huge-array", 8, 8, b"\x02g\xff\xff\xff\xff\x01\x00" + HUGE_COMPACT_ARRAY),
    HostileFrame("describe-groups-v5-huge-array", 15, 5, HUGE_COMPACT_ARRAY),
    HostileFrame("delete-groups-v2-huge-array", 42, 2, HUGE_COMPACT_ARRAY),
    HostileFrame("metadata-v1-huge-legacy-array", 3, 1, b"\x7f\xff\xff\xff"),
    # Heartbeat v4: group, generation, member, instance (null), then one tagged field of 2^32 - 2 bytes.
    HostileFrame(
        "heartbeat-v4-huge-tagged-field",
        12,
        4,
        b"\x02g\x00\x00\x00\x01\x02m\x00\x01\x00" + HUGE_COMPACT_ARRAY,
    ),
)

NULL_ARRAYS = (
    # Produce v9: transactional id (null), acks, timeout, topic_data null, tags.
    HostileFrame("produce-v9-null-topic-data", 0, 9, b"\x00\x00\x01\x00\x00\x03\xe8\x00\x00"),
    # ListOffsets v7: replica id, isolation level, topics null, tags.
    HostileFrame("list-offsets-v7-null-topics", 2, 7, b"\xff\xff\xff\xff\x00\x00\x00"),
    HostileFrame("list-offsets-v1-null-topics", 2, 1, b"\xff\xff\xff\xff\xff\xff\xff\xff"),
    HostileFrame("delete-groups-v2-null-groups", 42, 2, b"\x00\x00"),
    HostileFrame("describe-groups-v5-null-groups", 15, 5, b"\x00\x00\x00"),
)

ALL = ALLOCATION_BOMBS + NULL_ARRAYS


def request_payload(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    """Header (of the version's schema) and ``body``, without the size prefix."""
    cls = request_class(api_key, version)
    flexible = bool(cls is not None and cls.__header_schema__.__flexible__)
    client_id = b"hostile"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return header + (b"\x00" if flexible else b"") + body


def request_frame(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    """:func:`request_payload` behind its int32 size."""
    payload = request_payload(api_key, version, body, correlation_id)
    return struct.pack(">i", len(payload)) + payload
