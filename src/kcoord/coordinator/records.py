"""Records of the internal offsets log (``__consumer_offsets``): Kafka's key and value schemas.

This module fixes the in-memory shape that the group and offset state machines produce and
replay. Encoding to and decoding from Kafka's byte layout lives beside it in
:mod:`kcoord.coordinator.record_codec`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kcoord.coordinator.record_fields import GroupKey, GroupMemberKey, TopicPartitions
from kcoord.protocol.frozen_init import fast_frozen_init


@fast_frozen_init  # built on every commit
@dataclass(frozen=True, slots=True)
class OffsetCommitKey(GroupKey):
    """Key type 1 (0 is the legacy form, read but never written): a group's offset of one partition."""

    topic: str
    partition: int


@fast_frozen_init  # built on every commit
@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


class GroupMetadataKey(GroupKey):
    """Key type 2."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


# -- KIP-848 consumer groups (key types 3-8; every value is flexible, version 0)

TopicPartitionsRecord = TopicPartitions
"""Partitions by topic id, as the consumer group records hold them (the share group records' shape)."""


class ConsumerGroupMetadataKey(GroupKey):
    """Key type 3."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int


class ConsumerGroupPartitionMetadataKey(GroupKey):
    """Key type 4."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[tuple[uuid.UUID, str, int], ...]
    """(topic id, topic name, number of partitions) of every subscribed topic."""


class ConsumerGroupMemberMetadataKey(GroupMemberKey):
    """Key type 5."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A consumer group member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]
    """(name, metadata) of every protocol of its last JoinGroup, in its order of preference."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None
    """Tagged field 0: set for a member using the classic protocol, None for a consumer-protocol one."""


class ConsumerGroupTargetAssignmentMetadataKey(GroupKey):
    """Key type 6."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


class ConsumerGroupTargetAssignmentMemberKey(GroupMemberKey):
    """Key type 7."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitionsRecord


class ConsumerGroupCurrentMemberAssignmentKey(GroupMemberKey):
    """Key type 8."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    """Kafka's MemberState ids: 0 stable, 1 unrevoked partitions, 2 unreleased partitions."""
    assigned: TopicPartitionsRecord
    pending_revocation: TopicPartitionsRecord


ConsumerGroupRecordKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)
CONSUMER_GROUP_KEYS = (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
)
ConsumerGroupRecordValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)

RecordKey = OffsetCommitKey | GroupMetadataKey | ConsumerGroupRecordKey
RecordValue = OffsetCommitValue | GroupMetadataValue | ConsumerGroupRecordValue


@fast_frozen_init  # built on every commit
@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record of the offsets log; ``value=None`` is a tombstone (delete)."""

    key: RecordKey
    value: RecordValue | None
