"""One consumer group: its epochs, members, target assignment and who owns which partition.

Three epochs, as in Kafka: the *group epoch* rises whenever what the assignment depends on
changes (members, subscriptions, partition counts); the *target assignment epoch* is the group
epoch the current target assignment was computed for; each member's *epoch* is the target epoch
it has caught up with. The group state follows from them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator

from kcoord.coordinator.assignors.api import Assignment
from kcoord.coordinator.consumer.history import EpochHistory
from kcoord.coordinator.consumer.member import ConsumerGroupMember, MemberState


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.target_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        self.partitions_per_topic: dict[str, int] = {}
        """The partition counts of the subscribed topics the target assignment was computed from."""
        self.assignor: str | None = None
        self._owners: dict[tuple[str, int], str] = {}
        self.dead = False
        self.history = EpochHistory()

    # -- state

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch != self.target_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if member.member_epoch != self.target_epoch or member.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topics(self) -> frozenset[str]:
        topics: set[str] = set()
        for member in self.members.values():
            topics |= member.topics
        return frozenset(topics)

    def member_by_instance(self, instance_id: str) -> ConsumerGroupMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    # -- ownership

    def owner_of(self, topic: str, partition: int) -> str | None:
        return self._owners.get((topic, partition))

    def put_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member, keeping the partition owners in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        for topic, partition in _pairs(member.owned()):
            self._owners[(topic, partition)] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
        self.target.pop(member_id, None)
        return member

    def _release(self, member: ConsumerGroupMember) -> None:
        for topic, partition in _pairs(member.owned()):
            if self._owners.get((topic, partition)) == member.member_id:
                del self._owners[(topic, partition)]


def _pairs(assignment: Assignment) -> Iterator[tuple[str, int]]:
    for topic, parts in assignment.items():
        for partition in parts:
            yield topic, partition
