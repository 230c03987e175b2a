"""A hand-written reader for Heartbeat v0-4 frames, straight into the core's request type.

Heartbeat is the hot path of every stable classic group. The body is four fields; kio's entity
and the copy into :class:`HeartbeatRequest` after it cost more than reading them here.
``tests/apis/groups/test_hot_readers.py`` checks it against kio's reader for every version.

Body by version (request header v1 for v0-3, v2 with tagged fields for v4): group_id,
generation_id (int32), member_id; v3 adds ``group_instance_id`` (nullable); v4 is flexible
(compact strings, a tagged-field section after the header and the body). A frame this reader
cannot follow raises ``ValueError``; the router then leaves it to kio.
"""

from __future__ import annotations

from kcoord.apis.groups.wire_fields import (
    frame_reader,
    group_member,
    request_start,
    skip_tagged_fields,
    string,
)
from kcoord.coordinator.classic.messages import HeartbeatRequest
from kcoord.protocol.codec import RequestHeader

__all__ = ["decode_heartbeat"]

_KEY = 12
_FIRST_FLEXIBLE = 4
_VERSIONS = range(_FIRST_FLEXIBLE + 1)


def _decode(buf: bytes) -> tuple[RequestHeader, HeartbeatRequest]:
    version, correlation_id, client_id, flexible, pos = request_start(
        buf, _KEY, "Heartbeat", _VERSIONS, _FIRST_FLEXIBLE
    )
    group_id, generation, member_id, pos = group_member(buf, pos, flexible, "Heartbeat")
    instance_id = None
    if version >= 3:
        instance_id, pos = string(buf, pos, flexible)
    if flexible:
        pos = skip_tagged_fields(buf, pos)
    if pos > len(buf):
        raise ValueError("Heartbeat frame ends early")
    header = RequestHeader(_KEY, version, correlation_id, client_id)
    return header, HeartbeatRequest(group_id, generation, member_id, instance_id)


decode_heartbeat = frame_reader("Heartbeat", _decode)
"""Header and core request of one Heartbeat v0-4 frame (without its size prefix)."""
