"""Consumer groups as records of the offsets log, and back (Kafka's key types 3-8).

Live operations change the in-memory group and then write what changed: the manager takes a
:class:`GroupSnapshot` before an operation and :func:`changes` turns the difference into records,
in Kafka's order (a removed member's current assignment, target and metadata tombstones first; a
deleted group's records last). :class:`GroupReplayer` rebuilds groups from those records while
a partition loads. Topics are ids in the records and names in the core: :class:`TopicIds` maps
them, and a topic it cannot map (deleted meanwhile) is left out.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kcoord.coordinator.assignors.api import Assignment
from kcoord.coordinator.consumer.group import ConsumerGroup
from kcoord.coordinator.consumer.member import ConsumerGroupMember, MemberState
from kcoord.coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    TopicPartitionsRecord,
)

STATE_IDS = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
}
_STATES = {number: state for state, number in STATE_IDS.items()}


@dataclass(frozen=True, slots=True)
class TopicIds:
    id_of: Callable[[str], uuid.UUID | None]
    name_of: Callable[[uuid.UUID], str | None]


def name_based_topic_ids() -> TopicIds:
    """Stable ids derived from names: for a core used without a topic catalogue (tests)."""
    names: dict[uuid.UUID, str] = {}

    def id_of(name: str) -> uuid.UUID:
        topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"kcoord-topic:{name}")
        names[topic_id] = name
        return topic_id

    return TopicIds(id_of, names.get)


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    exists: bool = False
    epoch: int = 0
    target_epoch: int = 0
    partitions_per_topic: Mapping[str, int] = field(default_factory=dict)
    members: Mapping[str, ConsumerGroupMember] = field(default_factory=dict)
    target: Mapping[str, Assignment] = field(default_factory=dict)

    @classmethod
    def of(cls, group: ConsumerGroup | None) -> GroupSnapshot:
        if group is None:
            return cls()
        return cls(
            True,
            group.group_epoch,
            group.target_epoch,
            dict(group.partitions_per_topic),
            dict(group.members),
            dict(group.target),
        )


def changes(
    group_id: str, before: GroupSnapshot, after: GroupSnapshot, ids: TopicIds
) -> list[CoordinatorRecord]:
    records: list[CoordinatorRecord] = []
    add = records.append
    for member_id in before.members.keys() - after.members.keys():
        add(CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None))
        add(CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None))
        add(CoordinatorRecord(ConsumerGroupMemberMetadataKey(group_id, member_id), None))
    if not after.exists:
        if before.exists:
            add(CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id), None))
            add(CoordinatorRecord(ConsumerGroupPartitionMetadataKey(group_id), None))
            add(CoordinatorRecord(ConsumerGroupMetadataKey(group_id), None))
        return records
    for member_id, member in after.members.items():
        old = before.members.get(member_id)
        if old is None or _metadata(old) != _metadata(member):
            add(CoordinatorRecord(ConsumerGroupMemberMetadataKey(group_id, member_id), _metadata(member)))
    if not before.exists or before.partitions_per_topic != after.partitions_per_topic:
        topics = tuple(
            (topic_id, name, count)
            for name, count in sorted(after.partitions_per_topic.items())
            if (topic_id := ids.id_of(name)) is not None
        )
        add(
            CoordinatorRecord(
                ConsumerGroupPartitionMetadataKey(group_id), ConsumerGroupPartitionMetadataValue(topics)
            )
        )
    if not before.exists or before.epoch != after.epoch:
        add(CoordinatorRecord(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(after.epoch)))
    for member_id, target in after.target.items():
        if member_id in after.members and before.target.get(member_id) != target:
            value = ConsumerGroupTargetAssignmentMemberValue(_by_id(target, ids))
            add(CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), value))
    if not before.exists or before.target_epoch != after.target_epoch:
        value_epoch = ConsumerGroupTargetAssignmentMetadataValue(after.target_epoch)
        add(CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id), value_epoch))
    for member_id, member in after.members.items():
        old = before.members.get(member_id)
        if old is None or _assignment(old, ids) != _assignment(member, ids):
            key = ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id)
            add(CoordinatorRecord(key, _assignment(member, ids)))
    return records


def _metadata(member: ConsumerGroupMember) -> ConsumerGroupMemberMetadataValue:
    return ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topics)),
        subscribed_topic_regex=member.subscribed_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor,
        classic_member_metadata=member.classic,
    )


def _assignment(member: ConsumerGroupMember, ids: TopicIds) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=STATE_IDS[member.state],
        assigned=_by_id(member.assigned, ids),
        pending_revocation=_by_id(member.pending_revocation, ids),
    )


def _by_id(assignment: Assignment, ids: TopicIds) -> TopicPartitionsRecord:
    return tuple(
        (topic_id, tuple(sorted(parts)))
        for name, parts in sorted(assignment.items())
        if parts and (topic_id := ids.id_of(name)) is not None
    )


def _by_name(entries: TopicPartitionsRecord, ids: TopicIds) -> dict[str, frozenset[int]]:
    assignment: dict[str, frozenset[int]] = {}
    for topic_id, parts in entries:
        name = ids.name_of(topic_id)
        if name is not None and parts:
            assignment[name] = frozenset(parts)
    return assignment


class GroupReplayer:
    """Applies consumer group records to the groups of one shard (loading only)."""

    def __init__(self, groups: dict[str, ConsumerGroup], ids: TopicIds) -> None:
        self._groups = groups
        self._ids = ids

    def replay(self, key: ConsumerGroupRecordKey, value: object) -> None:
        group_id = key.group
        if isinstance(key, ConsumerGroupMetadataKey) and value is None:
            self._groups.pop(group_id, None)
            return
        group = self._groups.get(group_id)
        if group is None:
            if value is None:
                return
            group = self._groups[group_id] = ConsumerGroup(group_id)
        if isinstance(value, ConsumerGroupMetadataValue):
            group.group_epoch = value.epoch
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            topics = value.topics if isinstance(value, ConsumerGroupPartitionMetadataValue) else ()
            group.partitions_per_topic = {name: count for _, name, count in topics}
        elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
            group.target_epoch = value.assignment_epoch
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
                group.target[key.member_id] = _by_name(value.topic_partitions, self._ids)
            else:
                group.target.pop(key.member_id, None)
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            if isinstance(value, ConsumerGroupMemberMetadataValue):
                member = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
                group.put_member(
                    member.with_changes(
                        instance_id=value.instance_id,
                        rack_id=value.rack_id,
                        client_id=value.client_id,
                        client_host=value.client_host,
                        subscribed_topics=frozenset(value.subscribed_topic_names),
                        subscribed_regex=value.subscribed_topic_regex,
                        rebalance_timeout_ms=value.rebalance_timeout_ms,
                        server_assignor=value.server_assignor,
                        classic=value.classic_member_metadata,
                    )
                )
            else:
                group.remove_member(key.member_id)
        elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue) and isinstance(
            key, ConsumerGroupCurrentMemberAssignmentKey
        ):
            member = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            group.put_member(
                member.with_changes(
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=_STATES.get(value.state, MemberState.STABLE),
                    assigned=_by_name(value.assigned, self._ids),
                    pending_revocation=_by_name(value.pending_revocation, self._ids),
                )
            )
