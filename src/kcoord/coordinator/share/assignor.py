"""The share groups' server-side assignor: partitions may go to several members at once.

Kafka's ``simple`` share assignor (KIP-932) balances each topic over the members subscribed to
it. With at least as many members as partitions every member gets one partition and the
partitions are shared as evenly as possible (three members on one partition all read it); with
fewer members every partition gets one member, spread round-robin. Members are taken in member id
order, so the result depends only on the group, not on the order members joined. Kafka 4.0 also
keeps a partition with the members that already had it (hashing member ids first); kcoord's
balance is the same, its choice of which member shares which partition may differ.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

__all__ = ["SIMPLE_ASSIGNOR", "assign_share_partitions"]

SIMPLE_ASSIGNOR = "simple"

MemberAssignment = dict[uuid.UUID, list[int]]


def assign_share_partitions(
    subscriptions: Mapping[str, tuple[str, ...]], topics: Mapping[str, tuple[uuid.UUID, int]]
) -> dict[str, tuple[tuple[uuid.UUID, tuple[int, ...]], ...]]:
    """``member -> ((topic id, partitions), ...)`` for ``subscriptions`` (member -> topic names), given
    ``topics`` (name -> (topic id, partition count)); a topic that does not exist is left out."""
    assignment: dict[str, MemberAssignment] = {member: {} for member in subscriptions}
    subscribed = sorted({name for names in subscriptions.values() for name in names})
    for name in subscribed:
        if name not in topics:
            continue
        topic_id, partitions = topics[name]
        members = sorted(m for m, names in subscriptions.items() if name in names)
        if partitions < 1 or not members:
            continue
        if len(members) >= partitions:
            for index, member in enumerate(members):
                assignment[member].setdefault(topic_id, []).append(index % partitions)
        else:
            for partition in range(partitions):
                assignment[members[partition % len(members)]].setdefault(topic_id, []).append(partition)
    return {
        member: tuple(sorted((topic_id, tuple(sorted(parts))) for topic_id, parts in by_topic.items()))
        for member, by_topic in assignment.items()
    }
