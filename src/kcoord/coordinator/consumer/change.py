"""What one consumer-group operation changed: its records and response, and the groups it leaves
due for a downgrade to the classic protocol.

Every operation of :class:`~kcoord.coordinator.consumer.manager.ConsumerGroupManager` and of
:class:`~kcoord.coordinator.consumer.classic_members.ClassicMemberRequests` that may change a group
returns one; nothing is kept for a caller to collect later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcoord.coordinator.result import CoordinatorResult

__all__ = ["ConsumerGroupChange"]


@dataclass(slots=True)
class ConsumerGroupChange(CoordinatorResult):
    """A :class:`CoordinatorResult` plus the groups the change leaves due for a downgrade."""

    downgrades: dict[str, int] = field(default_factory=dict)
    """group -> its epoch before the leave, for each group whose last consumer-protocol member
    left while classic members remain (and the policy allows downgrades). The shard converts
    them (:meth:`~kcoord.coordinator.shard.GroupCoordinatorShard._downgrade_where_due`)."""
