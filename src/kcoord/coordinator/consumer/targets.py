"""The server-side assignors of a shard's consumer groups and the target assignments they compute."""

from __future__ import annotations

from collections.abc import Sequence

from kcoord.coordinator.assignors import AssignmentSpec, MemberSpec, PartitionAssignor, assignors_by_name
from kcoord.coordinator.consumer.group import ConsumerGroup


class TargetAssignor:
    """The configured assignors (in preference order) and the target assignment of a group."""

    def __init__(self, names: Sequence[str]) -> None:
        available = assignors_by_name()
        self._assignors: dict[str, PartitionAssignor] = {
            name: available[name] for name in names if name in available
        }
        if not self._assignors:
            raise ValueError(f"no known assignor among {names}")

    @property
    def names(self) -> list[str]:
        return list(self._assignors)

    @property
    def default_name(self) -> str:
        return next(iter(self._assignors))

    def compute(self, group: ConsumerGroup) -> None:
        """A new target assignment for the group at its group epoch."""
        assignor = self.choose(group)
        spec = AssignmentSpec(
            members={
                member_id: MemberSpec(
                    subscribed_topics=member.topics,
                    current=group.target.get(member_id, member.assigned),
                    instance_id=member.instance_id,
                )
                for member_id, member in group.members.items()
            },
            partitions_per_topic=dict(group.partitions_per_topic),
        )
        group.target = dict(assignor.assign(spec))
        group.target_epoch = group.group_epoch
        group.assignor = assignor.name

    def choose(self, group: ConsumerGroup) -> PartitionAssignor:
        """The assignor most members ask for (ties by name), else the configured default."""
        wanted = sorted(
            (m.server_assignor for m in group.members.values() if m.server_assignor in self._assignors),
            key=lambda name: name or "",
        )
        if wanted:
            best = max(set(wanted), key=lambda name: (wanted.count(name), name))
            if best is not None:
                return self._assignors[best]
        return next(iter(self._assignors.values()))
