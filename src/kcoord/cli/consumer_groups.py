"""``kcoord groups describe`` for KIP-848 consumer groups: rows and members from ConsumerGroupDescribe.

A consumer group's assignment comes as topic names and partitions (no consumer-protocol bytes to
decode), and each member has an epoch and a target assignment it is reconciling towards. From
ConsumerGroupDescribe v1 each member also says which protocol it speaks: a group migrating between
the classic and the consumer protocol holds both kinds.
"""

from __future__ import annotations

from typing import Any

from kcoord.cli.partition_rows import partition_rows


def _assignment(assignment: Any) -> dict[str, list[int]]:
    return {str(tp.topic_name): sorted(int(p) for p in tp.partitions) for tp in assignment.topic_partitions}


MEMBER_HEADERS = ("MEMBER-ID", "PROTOCOL", "EPOCH", "CLIENT-ID", "HOST")

_PROTOCOLS = {0: "classic", 1: "consumer"}


def member_protocol(member: Any) -> str | None:
    """Protocol of the member: "classic" or "consumer"; None for -1 (unknown) or a v0 answer."""
    return _PROTOCOLS.get(int(getattr(member, "member_type", -1)))


def member_rows(members: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [m["member_id"], m["protocol"] or "-", str(m["member_epoch"]), m["client_id"], m["host"]]
        for m in members
    ]


def consumer_members(group: Any) -> list[dict[str, Any]]:
    return [
        {
            "member_id": str(m.member_id),
            "protocol": member_protocol(m),
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
