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

import struct

from kcoord.apis.groups.wire_fields import HEADER, I32, header_client_id, skip_tagged_fields, string
from kcoord.coordinator.classic.messages import HeartbeatRequest
from kcoord.protocol.codec import RequestHeader

__all__ = ["decode_heartbeat"]

_KEY = 12
_FIRST_FLEXIBLE = 4


def decode_heartbeat(frame: bytes) -> tuple[RequestHeader, HeartbeatRequest]:
    """Header and core request of one Heartbeat v0-4 frame (without its size prefix)."""
    try:
        return _decode(frame)
    except (struct.error, IndexError) as exc:
        raise ValueError(f"Heartbeat frame ends early: {exc}") from None


def _decode(buf: bytes) -> tuple[RequestHeader, HeartbeatRequest]:
    api_key, version, correlation_id = HEADER.unpack_from(buf, 0)
    if api_key != _KEY or not 0 <= version <= _FIRST_FLEXIBLE:
        raise ValueError(f"not a Heartbeat v0-4 frame (key {api_key} v{version})")
    flexible = version >= _FIRST_FLEXIBLE
    client_id, pos = header_client_id(buf, flexible)
    group_id, pos = string(buf, pos, flexible)
    generation = I32.unpack_from(buf, pos)[0]
    member_id, pos = string(buf, pos + 4, flexible)
    if group_id is None or member_id is None:
        raise ValueError("null group or member id in Heartbeat frame")
    instance_id = None
    if version >= 3:
        instance_id, pos = string(buf, pos, flexible)
    if flexible:
        pos = skip_tagged_fields(buf, pos)
    if pos > len(buf):
        raise ValueError("Heartbeat frame ends early")
    header = RequestHeader(_KEY, version, correlation_id, client_id)
    return header, HeartbeatRequest(group_id, generation, member_id, instance_id)
