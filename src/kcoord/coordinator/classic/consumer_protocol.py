"""The embedded consumer protocol: what ``consumer``-type members put in their metadata bytes.

The coordinator only needs the subscribed topics (for OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC
and for offset expiry), but the whole of ConsumerProtocolSubscription and
ConsumerProtocolAssignment v0-v3 is decoded so tests and assignors can use it too. Versions
above 3 are read by their v3 prefix, as Kafka reads every version by its v0 prefix: new
versions may only append fields. None of these structures is flexible (no tagged fields).

Layouts (big-endian):

- Subscription: ``version i16, topics [string], user_data bytes?``; v1+ ``owned_partitions
  [topic string, partitions [i32]]``; v2+ ``generation_id i32``; v3+ ``rack_id string?``.
- Assignment: ``version i16, assigned_partitions [topic string, partitions [i32]],
  user_data bytes?`` (the same in v0-v3).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kcoord.coordinator.assignors.api import Assignment

PROTOCOL_TYPE = "consumer"

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


class ConsumerProtocolError(ValueError):
    """The bytes do not follow the consumer protocol schema."""


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    version: int
    assigned_partitions: TopicPartitions = ()
    user_data: bytes | None = None


@dataclass(slots=True)
class _Reader:
    data: bytes
    position: int = field(default=0)

    def _take(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise ConsumerProtocolError("truncated consumer protocol data")
        chunk = self.data[self.position : self.position + size]
        self.position += size
        return chunk

    def i16(self) -> int:
        value: int = struct.unpack(">h", self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = struct.unpack(">i", self._take(4))[0]
        return value

    def nullable_string(self) -> str | None:
        size = self.i16()
        if size == -1:
            return None
        try:
            return self._take(size).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError("invalid utf-8 in string") from exc

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise ConsumerProtocolError("null where a string is required")
        return value

    def nullable_bytes(self) -> bytes | None:
        size = self.i32()
        return None if size == -1 else self._take(size)

    def count(self) -> int:
        size = self.i32()
        if size < 0:
            raise ConsumerProtocolError("null array where an array is required")
        return size

    def topic_partitions(self) -> TopicPartitions:
        return tuple(
            (self.string(), tuple(self.i32() for _ in range(self.count()))) for _ in range(self.count())
        )


def decode_subscription(data: bytes) -> ConsumerSubscription:
    """Decode ConsumerProtocolSubscription; raises :class:`ConsumerProtocolError` when malformed."""
    reader = _Reader(data)
    version = reader.i16()
    if version < 0:
        raise ConsumerProtocolError(f"negative subscription version {version}")
    topics = tuple(reader.string() for _ in range(reader.count()))
    user_data = reader.nullable_bytes()
    owned: TopicPartitions = reader.topic_partitions() if version >= 1 else ()
    generation_id = reader.i32() if version >= 2 else -1
    rack_id = reader.nullable_string() if version >= 3 else None
    return ConsumerSubscription(version, topics, user_data, owned, generation_id, rack_id)


def decode_assignment(data: bytes) -> ConsumerAssignment:
    """Decode ConsumerProtocolAssignment; raises :class:`ConsumerProtocolError` when malformed."""
    reader = _Reader(data)
    version = reader.i16()
    if version < 0:
        raise ConsumerProtocolError(f"negative assignment version {version}")
    return ConsumerAssignment(version, reader.topic_partitions(), reader.nullable_bytes())


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def _bytes(value: bytes | None) -> bytes:
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def _topic_partitions(value: TopicPartitions) -> bytes:
    out = [struct.pack(">i", len(value))]
    for topic, partitions in value:
        out.append(_string(topic))
        out.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))
    return b"".join(out)


def encode_subscription(subscription: ConsumerSubscription) -> bytes:
    """Encode at ``subscription.version`` (0-3)."""
    version = subscription.version
    out = [struct.pack(">hi", version, len(subscription.topics))]
    out.extend(_string(topic) for topic in subscription.topics)
    out.append(_bytes(subscription.user_data))
    if version >= 1:
        out.append(_topic_partitions(subscription.owned_partitions))
    if version >= 2:
        out.append(struct.pack(">i", subscription.generation_id))
    if version >= 3:
        out.append(_string(subscription.rack_id))
    return b"".join(out)


def encode_assignment(assignment: ConsumerAssignment) -> bytes:
    """Encode ConsumerProtocolAssignment (identical layout in v0-v3)."""
    return (
        struct.pack(">h", assignment.version)
        + _topic_partitions(assignment.assigned_partitions)
        + _bytes(assignment.user_data)
    )


MAX_ASSIGNMENT_VERSION = 3
"""ConsumerProtocolAssignment has one layout in v0-v3; a member that subscribed with a later
version is answered in v3, which every client reads."""


def assignment_bytes(assignment: Assignment, subscription_version: int) -> bytes:
    """``assignment`` as ConsumerProtocolAssignment bytes, in the version the member subscribed with."""
    return encode_assignment(
        ConsumerAssignment(
            version=min(subscription_version, MAX_ASSIGNMENT_VERSION),
            assigned_partitions=tuple(
                (topic, tuple(sorted(parts))) for topic, parts in sorted(assignment.items()) if parts
            ),
        )
    )


def owned_partitions(owned: tuple[tuple[str, tuple[int, ...]], ...]) -> Assignment:
    """A subscription's owned partitions as an assignment (topic -> partitions)."""
    merged: dict[str, frozenset[int]] = {}
    for topic, parts in owned:
        merged[topic] = merged.get(topic, frozenset()) | frozenset(parts)
    return merged
