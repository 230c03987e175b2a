"""Server-side partition assignors of consumer (KIP-848) groups: ``uniform`` (default) and ``range``."""

from kcoord.coordinator.assignors.api import (
    Assignment,
    AssignmentSpec,
    MemberSpec,
    PartitionAssignor,
)
from kcoord.coordinator.assignors.range import RangeAssignor
from kcoord.coordinator.assignors.uniform import UniformAssignor

__all__ = [
    "Assignment",
    "AssignmentSpec",
    "MemberSpec",
    "PartitionAssignor",
    "RangeAssignor",
    "UniformAssignor",
    "assignors_by_name",
]


def assignors_by_name() -> dict[str, PartitionAssignor]:
    """Every built-in assignor under its protocol name; the first one is the default."""
    return {UniformAssignor.name: UniformAssignor(), RangeAssignor.name: RangeAssignor()}
