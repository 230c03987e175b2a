"""Field groups that several coordinator record schemas share, read and written in one place.

The group records of ``__consumer_offsets`` (consumer groups, key types 3-8; share groups, 10-15),
the share state records of ``__share_group_state`` and the transaction records of
``__transaction_state`` repeat a few shapes: a value's leading int16 version, a key naming a
group (and a member), a member's client fields, a flexible array of ``(topic id, partitions)``,
and int tagged fields that are left out at their default. Each schema module states its own
layout; this module holds the code those layouts have in common, on top of
:mod:`kcoord.coordinator.record_io`'s primitives.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from typing import TypeVar

from kcoord.coordinator.record_io import RecordReader, RecordWriter, UnsupportedRecordVersionError

__all__ = [
    "GroupKey",
    "GroupMemberKey",
    "IntTag",
    "MemberClient",
    "TopicPartitions",
    "read_group_key",
    "read_int_tags",
    "read_member_client",
    "read_partition_ids",
    "read_topic_partitions",
    "read_value_version",
    "write_group_key",
    "write_int_tags",
    "write_member_client",
    "write_partition_ids",
    "write_topic_partitions",
]

TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
"""Partitions by topic id, as the group records hold an assignment."""

_Key = TypeVar("_Key", bound="GroupKey")


def read_value_version(reader: RecordReader, versions: Container[int], what: str) -> int:
    """A value's leading int16 version; raises UnsupportedRecordVersionError for one not in ``versions``."""
    version = reader.int16("version")
    if version not in versions:
        raise UnsupportedRecordVersionError(f"{what} version {version} is not supported")
    return version


@dataclass(frozen=True, slots=True)
class GroupKey:
    """The key of an offsets-log record, which always names its group first: each record type is a
    subclass (a group's own records add no field; a member's, an offset's add what else they name)."""

    group: str


@dataclass(frozen=True, slots=True)
class GroupMemberKey(GroupKey):
    """The key of a record about one member of a group."""

    member_id: str


def write_group_key(writer: RecordWriter, record_type: int, key: GroupKey) -> None:
    """A group record's key: its int16 type, the group id and, for a member's record, the member id."""
    writer.int16(record_type, "type")
    writer.string(key.group, "groupId")
    if isinstance(key, GroupMemberKey):
        writer.string(key.member_id, "memberId")


def read_group_key(reader: RecordReader, key_type: type[_Key]) -> _Key:
    """The rest of a group record's key after its type (keys are never flexible)."""
    group = reader.string("groupId", False)
    if issubclass(key_type, GroupMemberKey):
        return key_type(group, reader.string("memberId", False))
    return key_type(group)


MemberClient = tuple[str | None, str, str, tuple[str, ...]]
"""(rack id, client id, client host, subscribed topic names): the fields a consumer group member's
and a share group member's metadata value both carry, in this order."""


def write_member_client(
    writer: RecordWriter, rack_id: str | None, client_id: str, client_host: str, topic_names: tuple[str, ...]
) -> None:
    writer.nullable_string(rack_id, "rackId")
    writer.string(client_id, "clientId")
    writer.string(client_host, "clientHost")
    writer.array_length(len(topic_names), "subscribedTopicNames")
    for name in topic_names:
        writer.string(name, "subscribedTopicName")


def read_member_client(reader: RecordReader) -> MemberClient:
    rack_id = reader.nullable_string("rackId", True)
    client_id = reader.string("clientId", True)
    client_host = reader.string("clientHost", True)
    count = reader.array_length("subscribedTopicNames", True)
    return (
        rack_id,
        client_id,
        client_host,
        tuple(reader.string("subscribedTopicName", True) for _ in range(count)),
    )


def write_partition_ids(writer: RecordWriter, partitions: tuple[int, ...]) -> None:
    writer.array_length(len(partitions), "partitions")
    for partition in partitions:
        writer.int32(partition, "partition")


def read_partition_ids(reader: RecordReader) -> tuple[int, ...]:
    return tuple(reader.int32("partition") for _ in range(reader.array_length("partitions", True)))


def write_topic_partitions(writer: RecordWriter, topics: TopicPartitions, field: str) -> None:
    """A flexible array of ``(topic id, partitions)`` structs."""
    writer.array_length(len(topics), field)
    for topic_id, partitions in topics:
        writer.uuid(topic_id)
        write_partition_ids(writer, partitions)
        writer.empty_tagged_fields()


def read_topic_partitions(reader: RecordReader, field: str) -> TopicPartitions:
    topics = []
    for _ in range(reader.array_length(field, True)):
        topic_id = reader.uuid("topicId")
        topics.append((topic_id, read_partition_ids(reader)))
        reader.skip_tagged_fields("TopicPartitions")
    return tuple(topics)


@dataclass(frozen=True, slots=True)
class IntTag:
    """An int tagged field of a value: written only when it differs from its default, as Kafka's
    generated code does, and read back as the default when absent."""

    tag: int
    field: str
    """The value's attribute (and the name in error messages)."""
    write: Callable[[RecordWriter, int, str], None]
    """``RecordWriter.int16``, ``int32`` or ``int64``."""
    read: Callable[[RecordReader, str], int]
    """The matching ``RecordReader`` method."""
    default: int


def write_int_tags(writer: RecordWriter, value: object, tags: Iterable[IntTag]) -> dict[int, bytes]:
    """The payloads, by tag, of ``value``'s int tagged fields that are not at their default."""
    payloads: dict[int, bytes] = {}
    for tag in tags:
        number = getattr(value, tag.field)
        if number != tag.default:
            payload = writer.sub(tag.field)
            tag.write(payload, number, tag.field)
            payloads[tag.tag] = payload.getvalue()
    return payloads


def read_int_tags(reader: RecordReader, raw_tags: dict[int, bytes], tags: Iterable[IntTag]) -> dict[str, int]:
    """Each int tagged field by attribute (its default when absent); raises RecordDecodeError when a
    payload is not exactly one such int."""
    values: dict[str, int] = {}
    for tag in tags:
        raw = raw_tags.get(tag.tag)
        if raw is None:
            values[tag.field] = tag.default
            continue
        payload = reader.sub(raw, tag.field)
        values[tag.field] = tag.read(payload, tag.field)
        payload.finish()
    return values
