"""Records of ``__share_group_state``: Kafka 4.2's share coordinator schemas, in memory and in bytes.

==========================================  ===================================================
key 0 ShareSnapshot(groupId, topicId uuid,   value v0 (flexible): snapshotEpoch i32, stateEpoch
      partition i32)                         i32, leaderEpoch i32, startOffset i64,
                                             createTimestamp i64, writeTimestamp i64,
                                             stateBatches[firstOffset i64, lastOffset i64,
                                             deliveryState i8, deliveryCount i16];
                                             tag 0 deliveryCompleteCount i32 (default -1)
key 1 ShareUpdate(groupId, topicId uuid,     value v0 (flexible): snapshotEpoch i32, leaderEpoch
      partition i32)                         i32, startOffset i64 (-1: unchanged),
                                             stateBatches[...]; tag 0 deliveryCompleteCount i32
==========================================  ===================================================

A key is its int16 record type then the key fields (not flexible); a value is its int16 version
then the fields. An empty value is a tombstone. Delivery states are 0 Available, 2 Acknowledged,
4 Archived. A share partition's state lives on partition :func:`state_partition_for` of the topic:
Kafka hashes ``"groupId:topicId:partition"`` (the topic id in its base64 form) like a group id.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

from kcoord.coordinator.partitioner import partition_for
from kcoord.coordinator.record_fields import IntTag, read_int_tags, read_value_version, write_int_tags
from kcoord.coordinator.record_io import RecordDecodeError, RecordReader, RecordWriter
from kcoord.coordinator.record_serde import KeyValueSerde
from kcoord.coordinator.share.partition_state import StateBatch

__all__ = [
    "SHARE_STATE_TOPIC",
    "ShareSnapshotValue",
    "ShareStateKey",
    "ShareStateRecord",
    "ShareStateSerde",
    "ShareUpdateValue",
    "decode_state_record",
    "encode_state_key",
    "encode_state_value",
    "state_partition_for",
]

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_TYPE = 0
UPDATE_TYPE = 1
_VALUE_VERSION = 0
_DELIVERY_COMPLETE_COUNT_TAG = 0
_TAGS = (
    IntTag(
        _DELIVERY_COMPLETE_COUNT_TAG, "delivery_complete_count", RecordWriter.int32, RecordReader.int32, -1
    ),
)


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """One share partition: (share group, topic id, partition). ``snapshot`` picks key type 0 or 1."""

    group_id: str
    topic_id: uuid.UUID
    partition: int
    snapshot: bool = True

    @property
    def coordinator_key(self) -> str:
        """Kafka's ``SharePartitionKey.asCoordinatorKey()``: what picks the state partition."""
        return f"{self.group_id}:{topic_id_text(self.topic_id)}:{self.partition}"

    def as_snapshot(self) -> ShareStateKey:
        return ShareStateKey(self.group_id, self.topic_id, self.partition, True)

    def as_update(self) -> ShareStateKey:
        return ShareStateKey(self.group_id, self.topic_id, self.partition, False)


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    """-1: the start offset does not change."""
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareStateRecord:
    """One record of ``__share_group_state``; ``value=None`` is a tombstone."""

    key: ShareStateKey
    value: ShareSnapshotValue | ShareUpdateValue | None


def topic_id_text(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def state_partition_for(key: str, num_partitions: int) -> int:
    """The ``__share_group_state`` partition of a coordinator key (``abs(hashCode) % partitions``)."""
    return partition_for(key, num_partitions)


def encode_state_key(key: ShareStateKey) -> bytes:
    writer = RecordWriter("ShareStateKey")
    writer.int16(SNAPSHOT_TYPE if key.snapshot else UPDATE_TYPE, "type")
    writer.string(key.group_id, "groupId")
    writer.uuid(key.topic_id)
    writer.int32(key.partition, "partition")
    return writer.getvalue()


def encode_state_value(value: ShareSnapshotValue | ShareUpdateValue | None) -> bytes | None:
    if value is None:
        return None
    writer = RecordWriter(type(value).__name__, flexible=True)
    writer.int16(_VALUE_VERSION, "version")
    writer.int32(value.snapshot_epoch, "snapshotEpoch")
    if isinstance(value, ShareSnapshotValue):
        writer.int32(value.state_epoch, "stateEpoch")
    writer.int32(value.leader_epoch, "leaderEpoch")
    writer.int64(value.start_offset, "startOffset")
    if isinstance(value, ShareSnapshotValue):
        writer.int64(value.create_timestamp, "createTimestamp")
        writer.int64(value.write_timestamp, "writeTimestamp")
    writer.array_length(len(value.state_batches), "stateBatches")
    for batch in value.state_batches:
        writer.int64(batch.first_offset, "firstOffset")
        writer.int64(batch.last_offset, "lastOffset")
        writer.int8(batch.delivery_state, "deliveryState")
        writer.int16(batch.delivery_count, "deliveryCount")
        writer.empty_tagged_fields()
    writer.tagged_fields(write_int_tags(writer, value, _TAGS))
    return writer.getvalue()


def decode_state_key(key: bytes) -> ShareStateKey | None:
    """The key, or None for a record type this coordinator does not know."""
    reader = RecordReader(key, "ShareStateKey")
    record_type = reader.int16("type")
    if record_type not in (SNAPSHOT_TYPE, UPDATE_TYPE):
        return None
    group_id = reader.string("groupId", False)
    topic_id = reader.uuid("topicId")
    partition = reader.int32("partition")
    reader.finish()
    return ShareStateKey(group_id, topic_id, partition, record_type == SNAPSHOT_TYPE)


def decode_state_value(key: ShareStateKey, value: bytes) -> ShareSnapshotValue | ShareUpdateValue:
    name = "ShareSnapshotValue" if key.snapshot else "ShareUpdateValue"
    reader = RecordReader(value, name)
    read_value_version(reader, (_VALUE_VERSION,), name)
    snapshot_epoch = reader.int32("snapshotEpoch")
    state_epoch = reader.int32("stateEpoch") if key.snapshot else 0
    leader_epoch = reader.int32("leaderEpoch")
    start_offset = reader.int64("startOffset")
    timestamps = (reader.int64("createTimestamp"), reader.int64("writeTimestamp")) if key.snapshot else (0, 0)
    batches = []
    for _ in range(reader.array_length("stateBatches", True)):
        batches.append(
            StateBatch(
                reader.int64("firstOffset"),
                reader.int64("lastOffset"),
                reader.int8("deliveryState"),
                reader.int16("deliveryCount"),
            )
        )
        reader.skip_tagged_fields("StateBatch")
    tags = reader.tagged_fields("value")
    reader.finish()
    delivery_complete_count = read_int_tags(reader, tags, _TAGS)["delivery_complete_count"]
    if key.snapshot:
        return ShareSnapshotValue(
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            start_offset,
            *timestamps,
            tuple(batches),
            delivery_complete_count,
        )
    return ShareUpdateValue(
        snapshot_epoch, leader_epoch, start_offset, tuple(batches), delivery_complete_count
    )


def decode_state_record(key: bytes, value: bytes | None) -> ShareStateRecord | None:
    """One record (None: a record type this coordinator skips); raises RecordDecodeError if unreadable."""
    if len(key) < 2:
        raise RecordDecodeError("ShareStateKey: shorter than its type")
    decoded = decode_state_key(key)
    if decoded is None:
        return None
    return ShareStateRecord(decoded, None if value is None else decode_state_value(decoded, value))


class ShareStateSerde(KeyValueSerde[ShareStateRecord]):
    """The runtime's ``RecordSerde`` for ``__share_group_state`` (no load shortcut: snapshots bound
    the replay)."""

    def __init__(self) -> None:
        super().__init__(encode_state_key, encode_state_value, decode_state_record)
