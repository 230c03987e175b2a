"""A hand-written reader for OffsetFetch v8-9 frames (one or more groups), for the hot path.

Consumers fetch their committed offsets on every assignment and admin tools poll them; v8-9 are
what current clients send. ``tests/apis/groups/test_hot_readers.py`` checks it against kio's
reader for both versions. Older versions are left to kio (their answers differ in shape too).

Body (flexible: compact strings and arrays, tagged-field sections after the header, each topic,
each group and the body): groups[] of group_id, (v9) member_id (nullable) and member_epoch
(int32), topics[] (nullable: every committed partition) of name and partition_indexes[] (int32);
then require_stable (bool). A frame this reader cannot follow raises ``ValueError``; the router
then leaves it to kio.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kcoord.apis.groups.wire_fields import (
    I32,
    array_length,
    frame_reader,
    request_start,
    skip_tagged_fields,
    string,
)
from kcoord.coordinator.offsets import OffsetFetchTopic
from kcoord.protocol.codec import RequestHeader

__all__ = ["OffsetFetchGroupRequest", "OffsetFetchRequestV8", "decode_offset_fetch"]

_KEY = 9
_VERSIONS = range(8, 10)


@dataclass(slots=True)
class OffsetFetchGroupRequest:
    """One group of a v8+ OffsetFetch, with the attribute names of kio's entity."""

    group_id: str
    member_id: str | None
    member_epoch: int
    topics: list[OffsetFetchTopic] | None


@dataclass(slots=True)
class OffsetFetchRequestV8:
    groups: list[OffsetFetchGroupRequest]
    require_stable: bool


def _decode(buf: bytes) -> tuple[RequestHeader, OffsetFetchRequestV8]:
    version, correlation_id, client_id, _, pos = request_start(buf, _KEY, "OffsetFetch", _VERSIONS, 8)
    group_count, pos = array_length(buf, pos, True)
    if group_count < 0:
        raise ValueError("null groups in OffsetFetch frame")
    groups: list[OffsetFetchGroupRequest] = []
    for _ in range(group_count):
        group_id, pos = string(buf, pos, True)
        if group_id is None:
            raise ValueError("null group id in OffsetFetch frame")
        member_id, member_epoch = None, -1
        if version >= 9:
            member_id, pos = string(buf, pos, True)
            member_epoch = I32.unpack_from(buf, pos)[0]
            pos += 4
        topic_count, pos = array_length(buf, pos, True)
        named: list[OffsetFetchTopic] = []
        for _ in range(topic_count):
            name, pos = string(buf, pos, True)
            count, pos = array_length(buf, pos, True)
            if name is None or count < 0:
                raise ValueError("null topic name or partitions in OffsetFetch frame")
            indexes = list(struct.unpack_from(f">{count}i", buf, pos))
            pos = skip_tagged_fields(buf, pos + 4 * count)
            named.append(OffsetFetchTopic(name, indexes))
        pos = skip_tagged_fields(buf, pos)
        topics = None if topic_count < 0 else named
        groups.append(OffsetFetchGroupRequest(group_id, member_id, member_epoch, topics))
    stable = buf[pos] != 0
    pos = skip_tagged_fields(buf, pos + 1)
    if pos > len(buf):
        raise ValueError("OffsetFetch frame ends early")
    return RequestHeader(_KEY, version, correlation_id, client_id), OffsetFetchRequestV8(groups, stable)


decode_offset_fetch = frame_reader("OffsetFetch", _decode)
"""Header and request of one OffsetFetch v8-9 frame (without its size prefix)."""
