"""``kcoord groups describe`` for KIP-848 consumer groups: rows and members from ConsumerGroupDescribe.

A consumer group's assignment comes as topic names and partitions (no consumer-protocol bytes to
decode), and each member has an epoch and a target assignment it is reconciling towards.
"""

from __future__ import annotations

from typing import Any

from kcoord.cli.partition_rows import partition_rows


def _assignment(assignment: Any) -> dict[str, list[int]]:
    return {str(tp.topic_name): sorted(int(p) for p in tp.partitions) for tp in assignment.topic_partitions}


def consumer_members(group: Any) -> list[dict[str, Any]]:
    return [
        {
            "member_id": str(m.member_id),
            "group_instance_id": m.instance_id,
            "client_id": str(m.client_id),
            "host": str(m.client_host),
            "member_epoch": int(m.member_epoch),
            "assignment": _assignment(m.assignment),
            "target_assignment": _assignment(m.target_assignment),
        }
        for m in group.members
    ]


def consumer_rows(
    group: Any, committed: dict[tuple[str, int], int], log_end: dict[tuple[str, int], int]
) -> list[dict[str, Any]]:
    """One row per partition that is assigned or committed, as for a classic group."""
    owners: dict[tuple[str, int], Any] = {}
    for member in group.members:
        for topic, partitions in _assignment(member.assignment).items():
            for partition in partitions:
                owners[(topic, partition)] = member
    return partition_rows(owners, committed, log_end)


def assigned_partitions(group: Any) -> list[tuple[str, int]]:
    return [
        (topic, partition)
        for member in group.members
        for topic, partitions in _assignment(member.assignment).items()
        for partition in partitions
    ]
