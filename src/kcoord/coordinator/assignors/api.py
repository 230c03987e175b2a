"""The contract between a consumer group and its server-side assignor.

An assignor is a pure function of the members (what each subscribes to and what it holds now)
and the topics (how many partitions each has). Assignments name topics, not topic ids; the edge
translates ids, so the core and its records stay readable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

Assignment = Mapping[str, frozenset[int]]
"""Topic name to the partitions of that topic."""

EMPTY_ASSIGNMENT: Assignment = {}


@dataclass(frozen=True, slots=True)
class MemberSpec:
    subscribed_topics: frozenset[str]
    current: Assignment = field(default_factory=dict)
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    members: Mapping[str, MemberSpec]
    partitions_per_topic: Mapping[str, int]
    """Only topics that exist; a subscribed topic absent here is not assigned."""


class PartitionAssignor(Protocol):
    name: ClassVar[str]

    def assign(self, spec: AssignmentSpec) -> dict[str, Assignment]:
        """The target assignment of every member of ``spec`` (members without partitions map to {})."""


def assignment_size(assignment: Assignment) -> int:
    return sum(len(partitions) for partitions in assignment.values())


def freeze(assignment: Mapping[str, set[int]]) -> dict[str, frozenset[int]]:
    """A member's assignment with empty topics dropped."""
    return {topic: frozenset(parts) for topic, parts in assignment.items() if parts}
