"""``kcoord groups describe`` for a share group (KIP-932): its members and assignments
(ShareGroupDescribe) and, per share partition, where it starts and its lag
(DescribeShareGroupOffsets)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

SHARE_PARTITION_HEADERS = ("TOPIC", "PARTITION", "START-OFFSET", "LAG")
SHARE_MEMBER_HEADERS = ("MEMBER-ID", "EPOCH", "CLIENT-ID", "HOST", "ASSIGNMENT")

Table = Callable[[Sequence[str], Sequence[Sequence[str]]], None]


def print_share_group(
    args: argparse.Namespace, group: Any, offsets: list[tuple[str, int, int, int]], print_table: Table
) -> int:
    members: list[dict[str, Any]] = [
        {
            "member_id": str(m.member_id),
            "member_epoch": int(m.member_epoch),
            "client_id": str(m.client_id),
            "host": str(m.client_host),
            "assignment": {
                str(t.topic_name): sorted(int(p) for p in t.partitions) for t in m.assignment.topic_partitions
            },
        }
        for m in group.members
    ]
    rows = [
        {"topic": topic, "partition": partition, "start_offset": start, "lag": lag}
        for topic, partition, start, lag in offsets
    ]
    if args.json:
        summary = {
            "group": args.group,
            "type": "share",
            "state": str(group.group_state),
            "group_epoch": int(group.group_epoch),
            "assignment_epoch": int(group.assignment_epoch),
            "assignor": str(group.assignor_name),
            "members": members,
            "partitions": rows,
        }
        print(json.dumps(summary, indent=1))
        return 0
    print(
        f"Group {args.group}: {group.group_state}, share group (KIP-932), group epoch {group.group_epoch}, "
        f"assignor {group.assignor_name}, {len(members)} member(s)\n"
    )
    print_table(SHARE_PARTITION_HEADERS, [[str(value) for value in row.values()] for row in rows])
    print()
    print_table(
        SHARE_MEMBER_HEADERS,
        [
            [
                m["member_id"],
                str(m["member_epoch"]),
                m["client_id"],
                m["host"],
                ",".join(f"{t}:{p}" for t, ps in m["assignment"].items() for p in ps) or "-",
            ]
            for m in members
        ],
    )
    return 0
