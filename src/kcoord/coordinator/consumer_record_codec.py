"""Kafka's byte layout for the KIP-848 consumer group records (key types 3-8).

===========================================  ==============================================
key 3 ConsumerGroupMetadata(group)            value v0: epoch i32
key 4 ConsumerGroupPartitionMetadata(group)   value v0: topics[topicId uuid, topicName,
                                              numPartitions i32, partitionMetadata[partition
                                              i32, racks[string]]] (written without racks)
key 5 ConsumerGroupMemberMetadata(group,      value v0: instanceId?, rackId?, clientId,
      memberId)                               clientHost, subscribedTopicNames[string],
                                              subscribedTopicRegex?, rebalanceTimeoutMs i32,
                                              serverAssignor?; tag 0 classicMemberMetadata?
                                              [sessionTimeoutMs i32, supportedProtocols[name,
                                              metadata bytes]]
key 6 ConsumerGroupTargetAssignmentMetadata   value v0: assignmentEpoch i32
key 7 ConsumerGroupTargetAssignmentMember     value v0: topicPartitions[topicId uuid,
      (group, memberId)                       partitions[i32]]
key 8 ConsumerGroupCurrentMemberAssignment    value v0: memberEpoch i32, previousMemberEpoch
      (group, memberId)                       i32, state i8, assignedPartitions[...],
                                              partitionsPendingRevocation[...]
===========================================  ==============================================

Keys are not flexible; every value is flexible (compact strings and arrays, tagged fields at the
end of each struct, skipped when read: Kafka 4.1's metadata hash among them). The reader and
writer are :mod:`kcoord.coordinator.record_codec`'s, handed in by it.
"""

from __future__ import annotations

from dataclasses import replace

from kcoord.coordinator.record_fields import (
    read_group_key,
    read_member_client,
    read_topic_partitions,
    read_value_version,
    write_group_key,
    write_member_client,
    write_topic_partitions,
)
from kcoord.coordinator.record_io import RecordReader, RecordWriter
from kcoord.coordinator.records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupRecordValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)

KEY_TYPES: dict[type[ConsumerGroupRecordKey], int] = {
    ConsumerGroupMetadataKey: 3,
    ConsumerGroupPartitionMetadataKey: 4,
    ConsumerGroupMemberMetadataKey: 5,
    ConsumerGroupTargetAssignmentMetadataKey: 6,
    ConsumerGroupTargetAssignmentMemberKey: 7,
    ConsumerGroupCurrentMemberAssignmentKey: 8,
}
CONSUMER_KEY_CLASSES = tuple(KEY_TYPES)
_BY_TYPE: dict[int, type[ConsumerGroupRecordKey]] = {number: cls for cls, number in KEY_TYPES.items()}
VALUE_VERSION = 0
CLASSIC_MEMBER_METADATA_TAG = 0


def decode_key(record_type: int, reader: RecordReader) -> ConsumerGroupRecordKey:
    return read_group_key(reader, _BY_TYPE[record_type])


def encode_key(key: ConsumerGroupRecordKey, writer: RecordWriter) -> None:
    write_group_key(writer, KEY_TYPES[type(key)], key)


def decode_value(key: ConsumerGroupRecordKey, reader: RecordReader) -> ConsumerGroupRecordValue:
    name = type(key).__name__.replace("Key", "Value")
    read_value_version(reader, (VALUE_VERSION,), name)
    value = _decode_fields(key, reader)
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        classic = reader.tagged_fields(name).get(CLASSIC_MEMBER_METADATA_TAG)
        if classic is not None:
            value = replace(value, classic_member_metadata=_decode_classic(reader.sub(classic, name)))
    else:
        reader.skip_tagged_fields(name)
    reader.finish()
    return value


def _decode_classic(r: RecordReader) -> ClassicMemberMetadata:
    session_timeout_ms = r.int32("sessionTimeoutMs")
    protocols = []
    for _ in range(r.array_length("supportedProtocols", True)):
        protocols.append((r.string("name", True), r.bytes_("metadata", True)))
        r.skip_tagged_fields("ClassicProtocol")
    r.skip_tagged_fields("ClassicMemberMetadata")
    r.finish()
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))


def _encode_classic(classic: ClassicMemberMetadata, w: RecordWriter) -> None:
    w.int32(classic.session_timeout_ms, "session_timeout_ms")
    w.array_length(len(classic.supported_protocols), "supported_protocols")
    for name, metadata in classic.supported_protocols:
        w.string(name, "name")
        w.bytes_(metadata, "metadata")
        w.empty_tagged_fields()
    w.empty_tagged_fields()


def _decode_fields(key: ConsumerGroupRecordKey, r: RecordReader) -> ConsumerGroupRecordValue:
    if isinstance(key, ConsumerGroupMetadataKey):
        return ConsumerGroupMetadataValue(epoch=r.int32("epoch"))
    if isinstance(key, ConsumerGroupPartitionMetadataKey):
        topics = []
        for _ in range(r.array_length("topics", True)):
            topic_id = r.uuid("topicId")
            name = r.string("topicName", True)
            count = r.int32("numPartitions")
            for _ in range(r.array_length("partitionMetadata", True)):
                r.int32("partition")
                for _ in range(r.array_length("racks", True)):
                    r.string("rack", True)
                r.skip_tagged_fields("PartitionMetadata")
            r.skip_tagged_fields("TopicMetadata")
            topics.append((topic_id, name, count))
        return ConsumerGroupPartitionMetadataValue(tuple(topics))
    if isinstance(key, ConsumerGroupMemberMetadataKey):
        instance_id = r.nullable_string("instanceId", True)
        rack_id, client_id, client_host, topic_names = read_member_client(r)
        return ConsumerGroupMemberMetadataValue(
            instance_id,
            rack_id,
            client_id,
            client_host,
            topic_names,
            subscribed_topic_regex=r.nullable_string("subscribedTopicRegex", True),
            rebalance_timeout_ms=r.int32("rebalanceTimeoutMs"),
            server_assignor=r.nullable_string("serverAssignor", True),
        )
    if isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        return ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=r.int32("assignmentEpoch"))
    if isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        return ConsumerGroupTargetAssignmentMemberValue(read_topic_partitions(r, "topicPartitions"))
    return ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=r.int32("memberEpoch"),
        previous_member_epoch=r.int32("previousMemberEpoch"),
        state=r.int8("state"),
        assigned=read_topic_partitions(r, "assignedPartitions"),
        pending_revocation=read_topic_partitions(r, "partitionsPendingRevocation"),
    )


def encode_value(value: ConsumerGroupRecordValue, w: RecordWriter) -> None:
    w.int16(VALUE_VERSION, "version")
    if isinstance(value, ConsumerGroupMetadataValue):
        w.int32(value.epoch, "epoch")
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        w.array_length(len(value.topics), "topics")
        for topic_id, name, count in value.topics:
            w.uuid(topic_id)
            w.string(name, "topic_name")
            w.int32(count, "num_partitions")
            w.array_length(0, "partition_metadata")
            w.empty_tagged_fields()
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        w.nullable_string(value.instance_id, "instance_id")
        write_member_client(
            w, value.rack_id, value.client_id, value.client_host, value.subscribed_topic_names
        )
        w.nullable_string(value.subscribed_topic_regex, "subscribed_topic_regex")
        w.int32(value.rebalance_timeout_ms, "rebalance_timeout_ms")
        w.nullable_string(value.server_assignor, "server_assignor")
        if value.classic_member_metadata is not None:
            classic = w.sub("ClassicMemberMetadata")
            _encode_classic(value.classic_member_metadata, classic)
            w.tagged_fields({CLASSIC_MEMBER_METADATA_TAG: classic.getvalue()})
            return
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch, "assignment_epoch")
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        write_topic_partitions(w, value.topic_partitions, "topic_partitions")
    else:
        w.int32(value.member_epoch, "member_epoch")
        w.int32(value.previous_member_epoch, "previous_member_epoch")
        w.int8(value.state, "state")
        write_topic_partitions(w, value.assigned, "assigned_partitions")
        write_topic_partitions(w, value.pending_revocation, "partitions_pending_revocation")
    w.empty_tagged_fields()
