"""Records of the internal offsets log (``__consumer_offsets``): Kafka's key and value schemas.

This module fixes the in-memory shape that the group and offset state machines produce and
replay. Encoding to and decoding from Kafka's byte layout lives beside it in
:mod:`kcoord.coordinator.record_codec`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """Key type 1 (0 is the legacy form, read but never written)."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """Key type 2."""

    group: str


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


RecordKey = OffsetCommitKey | GroupMetadataKey
RecordValue = OffsetCommitValue | GroupMetadataValue


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record of the offsets log; ``value=None`` is a tombstone (delete)."""

    key: RecordKey
    value: RecordValue | None
