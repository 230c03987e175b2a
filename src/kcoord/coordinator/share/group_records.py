"""Share group records of ``__consumer_offsets`` (Kafka 4.2, KIP-932), in memory and in bytes.

==============================================  ===============================================
key 10 ShareGroupMemberMetadata(group, member)  value v0: rackId?, clientId, clientHost,
                                                subscribedTopicNames[string]
key 11 ShareGroupMetadata(group)                value v0: epoch i32, metadataHash i64 (4.1+)
key 12 ShareGroupTargetAssignmentMetadata       value v0: assignmentEpoch i32
       (group)
key 13 ShareGroupTargetAssignmentMember         value v0: topicPartitions[topicId uuid,
       (group, member)                          partitions[i32]]
key 14 ShareGroupCurrentMemberAssignment        value v0: memberEpoch i32, previousMemberEpoch
       (group, member)                          i32, state i8, assignedPartitions[topicId uuid,
                                                partitions[i32]]
key 15 ShareGroupStatePartitionMetadata(group)  value v0: initializingTopics[TopicPartitionsInfo],
                                                initializedTopics[TopicPartitionsInfo],
                                                deletingTopics[topicId uuid, topicName];
                                                TopicPartitionsInfo: topicId uuid, topicName,
                                                partitions[i32], createTimestamp i64
==============================================  ===============================================

Key 9 (ShareGroupPartitionMetadata) is no longer written by Kafka 4.1+ and is skipped here like
any key this codec does not know. Keys are not flexible; values are (compact strings and arrays,
tagged fields at the end of each struct, skipped when read). An empty value is a tombstone.
Registering these in the offsets log's decoder is the wiring round's one-line change:
:func:`decode_share_group_key` answers None for a type that is not a share group's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kcoord.coordinator.record_fields import (
    GroupKey,
    GroupMemberKey,
    TopicPartitions,
    read_group_key,
    read_member_client,
    read_partition_ids,
    read_topic_partitions,
    read_value_version,
    write_group_key,
    write_member_client,
    write_partition_ids,
    write_topic_partitions,
)
from kcoord.coordinator.record_io import RecordReader, RecordWriter

__all__ = [
    "SHARE_GROUP_KEY_TYPES",
    "ShareGroupCurrentMemberAssignmentKey",
    "ShareGroupCurrentMemberAssignmentValue",
    "ShareGroupMemberMetadataKey",
    "ShareGroupMemberMetadataValue",
    "ShareGroupMetadataKey",
    "ShareGroupMetadataValue",
    "ShareGroupRecord",
    "ShareGroupStatePartitionMetadataKey",
    "ShareGroupStatePartitionMetadataValue",
    "ShareGroupTargetAssignmentMemberKey",
    "ShareGroupTargetAssignmentMemberValue",
    "ShareGroupTargetAssignmentMetadataKey",
    "ShareGroupTargetAssignmentMetadataValue",
    "TopicPartitions",
    "decode_share_group_record",
    "encode_share_group_key",
    "encode_share_group_value",
]

TopicPartitionsInfo = tuple[uuid.UUID, str, tuple[int, ...], int]
"""(topic id, topic name, partitions, create timestamp)."""


class ShareGroupMemberMetadataKey(GroupMemberKey):
    """Key type 10."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


class ShareGroupMetadataKey(GroupKey):
    """Key type 11."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0
    """A hash of the subscribed topics (name, id, partitions) the group last saw: a change bumps the epoch.
    kcoord's own hash (:func:`~kcoord.coordinator.share.manager.topics_hash`), not Kafka's murmur3."""


class ShareGroupTargetAssignmentMetadataKey(GroupKey):
    """Key type 12."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


class ShareGroupTargetAssignmentMemberKey(GroupMemberKey):
    """Key type 13."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitions


class ShareGroupCurrentMemberAssignmentKey(GroupMemberKey):
    """Key type 14."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    """Kafka's MemberState id; share members are always 0 (stable): nothing to revoke."""
    assigned: TopicPartitions


class ShareGroupStatePartitionMetadataKey(GroupKey):
    """Key type 15."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: tuple[TopicPartitionsInfo, ...]
    """Share partitions whose state the share coordinator is asked to initialise."""
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    """Share partitions whose state is initialised."""
    deleting_topics: tuple[tuple[uuid.UUID, str], ...]
    """(topic id, name) whose share state is being deleted."""


ShareGroupKey = (
    ShareGroupMemberMetadataKey
    | ShareGroupMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
    | ShareGroupStatePartitionMetadataKey
)
ShareGroupValue = (
    ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
)


@dataclass(frozen=True, slots=True)
class ShareGroupRecord:
    """One share group record of the offsets log; ``value=None`` is a tombstone."""

    key: ShareGroupKey
    value: ShareGroupValue | None


SHARE_GROUP_KEY_TYPES: dict[type[ShareGroupKey], int] = {
    ShareGroupMemberMetadataKey: 10,
    ShareGroupMetadataKey: 11,
    ShareGroupTargetAssignmentMetadataKey: 12,
    ShareGroupTargetAssignmentMemberKey: 13,
    ShareGroupCurrentMemberAssignmentKey: 14,
    ShareGroupStatePartitionMetadataKey: 15,
}
_KEY_BY_TYPE: dict[int, type[ShareGroupKey]] = {number: cls for cls, number in SHARE_GROUP_KEY_TYPES.items()}
_VALUE_VERSION = 0


def encode_share_group_key(key: ShareGroupKey) -> bytes:
    writer = RecordWriter(type(key).__name__)
    write_group_key(writer, SHARE_GROUP_KEY_TYPES[type(key)], key)
    return writer.getvalue()


def _write_topic_infos(writer: RecordWriter, topics: tuple[TopicPartitionsInfo, ...], field: str) -> None:
    writer.array_length(len(topics), field)
    for topic_id, name, partitions, created in topics:
        writer.uuid(topic_id)
        writer.string(name, "topicName")
        write_partition_ids(writer, partitions)
        writer.int64(created, "createTimestamp")
        writer.empty_tagged_fields()


def encode_share_group_value(value: ShareGroupValue | None) -> bytes | None:
    if value is None:
        return None
    w = RecordWriter(type(value).__name__, flexible=True)
    w.int16(_VALUE_VERSION, "version")
    if isinstance(value, ShareGroupMemberMetadataValue):
        write_member_client(
            w, value.rack_id, value.client_id, value.client_host, value.subscribed_topic_names
        )
    elif isinstance(value, ShareGroupMetadataValue):
        w.int32(value.epoch, "epoch")
        w.int64(value.metadata_hash, "metadataHash")
    elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch, "assignmentEpoch")
    elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
        write_topic_partitions(w, value.topic_partitions, "topicPartitions")
    elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        w.int32(value.member_epoch, "memberEpoch")
        w.int32(value.previous_member_epoch, "previousMemberEpoch")
        w.int8(value.state, "state")
        write_topic_partitions(w, value.assigned, "assignedPartitions")
    else:
        _write_topic_infos(w, value.initializing_topics, "initializingTopics")
        _write_topic_infos(w, value.initialized_topics, "initializedTopics")
        w.array_length(len(value.deleting_topics), "deletingTopics")
        for topic_id, name in value.deleting_topics:
            w.uuid(topic_id)
            w.string(name, "topicName")
            w.empty_tagged_fields()
    w.empty_tagged_fields()
    return w.getvalue()


def decode_share_group_key(key: bytes) -> ShareGroupKey | None:
    """A share group key, or None when the record type is not one of a share group."""
    reader = RecordReader(key, "ShareGroupKey")
    record_type = reader.int16("type")
    cls = _KEY_BY_TYPE.get(record_type)
    if cls is None:
        return None
    decoded: ShareGroupKey = read_group_key(reader, cls)
    reader.finish()
    return decoded


def _read_topic_infos(r: RecordReader, field: str) -> tuple[TopicPartitionsInfo, ...]:
    topics = []
    for _ in range(r.array_length(field, True)):
        topic_id, name = r.uuid("topicId"), r.string("topicName", True)
        partitions = read_partition_ids(r)
        topics.append((topic_id, name, partitions, r.int64("createTimestamp")))
        r.skip_tagged_fields("TopicPartitionsInfo")
    return tuple(topics)


def decode_share_group_value(key: ShareGroupKey, value: bytes) -> ShareGroupValue:
    name = type(key).__name__.replace("Key", "Value")
    r = RecordReader(value, name)
    read_value_version(r, (_VALUE_VERSION,), name)
    decoded: ShareGroupValue
    if isinstance(key, ShareGroupMemberMetadataKey):
        decoded = ShareGroupMemberMetadataValue(*read_member_client(r))
    elif isinstance(key, ShareGroupMetadataKey):
        decoded = ShareGroupMetadataValue(r.int32("epoch"), r.int64("metadataHash"))
    elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
        decoded = ShareGroupTargetAssignmentMetadataValue(r.int32("assignmentEpoch"))
    elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
        decoded = ShareGroupTargetAssignmentMemberValue(read_topic_partitions(r, "topicPartitions"))
    elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
        epoch, previous, state = r.int32("memberEpoch"), r.int32("previousMemberEpoch"), r.int8("state")
        decoded = ShareGroupCurrentMemberAssignmentValue(
            epoch, previous, state, read_topic_partitions(r, "assignedPartitions")
        )
    else:
        initializing = _read_topic_infos(r, "initializingTopics")
        initialized = _read_topic_infos(r, "initializedTopics")
        deleting = []
        for _ in range(r.array_length("deletingTopics", True)):
            deleting.append((r.uuid("topicId"), r.string("topicName", True)))
            r.skip_tagged_fields("TopicInfo")
        decoded = ShareGroupStatePartitionMetadataValue(initializing, initialized, tuple(deleting))
    r.skip_tagged_fields("value")
    r.finish()
    return decoded


def decode_share_group_record(key: bytes, value: bytes | None) -> ShareGroupRecord | None:
    decoded = decode_share_group_key(key)
    if decoded is None:
        return None
    return ShareGroupRecord(decoded, None if value is None else decode_share_group_value(decoded, value))
