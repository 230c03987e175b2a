"""The ``uniform`` assignor (Kafka's default): balanced and sticky.

Balanced: every member gets its fair share of the partitions it may take; with one subscription
for all members, member sizes differ by at most one. Sticky: a member keeps what it holds up to
its share, so a join moves only the partitions the newcomer needs and a leave moves only the
leaver's partitions.

The algorithm, for members with possibly different subscriptions:
1. every partition of a subscribed, existing topic is to be assigned;
2. each member keeps its current partitions that it still subscribes to, up to its quota (the
   number of assignable partitions over the number of members, rounded up for as many members as
   the remainder allows, those holding most first, rounded down for the rest);
3. every partition left goes to the least loaded member subscribed to its topic (ties by member
   id), which is also where partitions of members over quota end up;
4. with different subscriptions, a final pass moves partitions from members more than one above
   another member that could take them, until no such move is left.
"""

from __future__ import annotations

from collections import defaultdict
from typing import ClassVar

from kcoord.coordinator.assignors.api import Assignment, AssignmentSpec, freeze

TopicPartition = tuple[str, int]


class UniformAssignor:
    name: ClassVar[str] = "uniform"

    def assign(self, spec: AssignmentSpec) -> dict[str, Assignment]:
        members = sorted(spec.members)
        if not members:
            return {}
        # 1. Assignable partitions.
        subscribed = {t for m in members for t in spec.members[m].subscribed_topics}
        partitions = [
            (topic, p) for topic in sorted(subscribed) for p in range(spec.partitions_per_topic.get(topic, 0))
        ]
        quotas = _quotas(sorted(members, key=lambda m: (-_size(spec.members[m].current), m)), len(partitions))
        held: dict[str, set[TopicPartition]] = {m: set() for m in members}
        taken: set[TopicPartition] = set()
        valid = set(partitions)
        # 2. Stickiness up to the quota; larger holdings first keep their lowest partitions.
        for member_id in sorted(members, key=lambda m: -_size(spec.members[m].current)):
            member = spec.members[member_id]
            current = sorted(
                (topic, p)
                for topic, parts in member.current.items()
                if topic in member.subscribed_topics
                for p in parts
            )
            for tp in current:
                if len(held[member_id]) >= quotas[member_id]:
                    break
                if tp in valid and tp not in taken:
                    held[member_id].add(tp)
                    taken.add(tp)
        # 3. The rest to the least loaded subscriber.
        for tp in partitions:
            if tp in taken:
                continue
            candidates = [m for m in members if tp[0] in spec.members[m].subscribed_topics]
            target = min(candidates, key=lambda m: (len(held[m]) >= quotas[m], len(held[m]), m))
            held[target].add(tp)
            taken.add(tp)
        # 4. Even out members with different subscriptions.
        if len({spec.members[m].subscribed_topics for m in members}) > 1:
            _rebalance(held, spec)
        result: dict[str, Assignment] = {}
        for member_id in members:
            by_topic: dict[str, set[int]] = defaultdict(set)
            for topic, p in held[member_id]:
                by_topic[topic].add(p)
            result[member_id] = freeze(by_topic)
        return result


def _size(assignment: Assignment) -> int:
    return sum(len(parts) for parts in assignment.values())


def _quotas(members: list[str], total: int) -> dict[str, int]:
    base, extra = divmod(total, len(members))
    return {m: base + (1 if i < extra else 0) for i, m in enumerate(members)}


def _rebalance(held: dict[str, set[TopicPartition]], spec: AssignmentSpec) -> None:
    """Move one partition at a time from a member to one holding two fewer that subscribes to it."""
    for _ in range(sum(len(h) for h in held.values()) + 1):
        moved = False
        for giver in sorted(held, key=lambda m: (-len(held[m]), m)):
            for taker in sorted(held, key=lambda m: (len(held[m]), m)):
                if len(held[giver]) - len(held[taker]) < 2:
                    break
                movable = sorted(tp for tp in held[giver] if tp[0] in spec.members[taker].subscribed_topics)
                if movable:
                    tp = movable[-1]
                    held[giver].discard(tp)
                    held[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return
