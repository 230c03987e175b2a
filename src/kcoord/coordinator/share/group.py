"""A share group as the replay of its records: members, epochs, target and current assignments.

A share group is ``Empty`` without members and ``Stable`` with them: a share member never has
partitions to revoke (another member may read the same partition), so it moves to its target
assignment at its next heartbeat and there is no reconciling state. ``Dead`` is a group that no
longer exists (describe of an unknown group).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcoord.coordinator.share.group_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareGroupValue,
    TopicPartitions,
)

__all__ = ["ShareGroup", "ShareMember"]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: TopicPartitions = ()


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    targets: dict[str, TopicPartitions] = field(default_factory=dict)
    state_metadata: ShareGroupStatePartitionMetadataValue | None = None
    metadata_hash: int = 0
    """The hash of the subscribed topics when the epoch last moved (ShareGroupMetadataValue)."""

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def member(self, member_id: str) -> ShareMember:
        member = self.members.get(member_id)
        if member is None:
            member = self.members[member_id] = ShareMember(member_id)
        return member

    def replay(self, key: ShareGroupKey, value: ShareGroupValue | None) -> None:
        """Apply one record (``value`` None: a tombstone)."""
        if isinstance(key, ShareGroupMetadataKey):
            if isinstance(value, ShareGroupMetadataValue):
                self.epoch, self.metadata_hash = value.epoch, value.metadata_hash
        elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            if isinstance(value, ShareGroupTargetAssignmentMetadataValue):
                self.assignment_epoch = value.assignment_epoch
        elif isinstance(key, ShareGroupStatePartitionMetadataKey):
            self.state_metadata = value if isinstance(value, ShareGroupStatePartitionMetadataValue) else None
        elif isinstance(key, ShareGroupMemberMetadataKey):
            if isinstance(value, ShareGroupMemberMetadataValue):
                member = self.member(key.member_id)
                member.rack_id, member.client_id = value.rack_id, value.client_id
                member.client_host, member.subscribed_topic_names = (
                    value.client_host,
                    value.subscribed_topic_names,
                )
            else:
                self.members.pop(key.member_id, None)
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            if isinstance(value, ShareGroupTargetAssignmentMemberValue):
                self.targets[key.member_id] = value.topic_partitions
            else:
                self.targets.pop(key.member_id, None)
        elif (
            isinstance(key, ShareGroupCurrentMemberAssignmentKey)
            and isinstance(value, ShareGroupCurrentMemberAssignmentValue)
            and key.member_id in self.members
        ):
            member = self.members[key.member_id]
            member.member_epoch, member.previous_member_epoch = (
                value.member_epoch,
                value.previous_member_epoch,
            )
            member.assigned = value.assigned
