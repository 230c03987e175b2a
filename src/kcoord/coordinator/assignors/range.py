"""The ``range`` assignor: per topic, consecutive ranges of partitions to the subscribed members.

Members are ordered by instance id when they have one, else by member id, so a static member
keeps its range across restarts. The first ``partitions % members`` members get one extra.
Members subscribed to the same topics with the same partition counts get co-partitioned ranges,
which is the point of this assignor.
"""

from __future__ import annotations

from collections import defaultdict
from typing import ClassVar

from kcoord.coordinator.assignors.api import Assignment, AssignmentSpec, freeze


class RangeAssignor:
    name: ClassVar[str] = "range"

    def assign(self, spec: AssignmentSpec) -> dict[str, Assignment]:
        result: dict[str, dict[str, set[int]]] = {member: defaultdict(set) for member in spec.members}
        for topic, count in sorted(spec.partitions_per_topic.items()):
            subscribers = sorted(
                (m for m, member in spec.members.items() if topic in member.subscribed_topics),
                key=lambda m: (spec.members[m].instance_id or "", m),
            )
            if not subscribers:
                continue
            quota, extra = divmod(count, len(subscribers))
            start = 0
            for index, member_id in enumerate(subscribers):
                size = quota + (1 if index < extra else 0)
                result[member_id][topic].update(range(start, start + size))
                start += size
        return {member: freeze(assignment) for member, assignment in result.items()}
