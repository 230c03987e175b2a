"""The partition table ``kcoord groups describe`` prints for both kinds of group.

Classic and KIP-848 consumer groups differ only in how a member's assignment is read; once each
assigned partition has its owning member, the rows (offsets, lag, owner) are built the same way.
"""

from __future__ import annotations

from typing import Any

PARTITION_HEADERS = (
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)


def partition_rows(
    owners: dict[tuple[str, int], Any],
    committed: dict[tuple[str, int], int],
    log_end: dict[tuple[str, int], int],
) -> list[dict[str, Any]]:
    """One row per partition that is assigned (``owners``: partition → member) or committed."""
    rows = []
    for topic, partition in sorted(set(owners) | set(committed)):
        member = owners.get((topic, partition))
        current = committed.get((topic, partition))
        end = log_end.get((topic, partition))
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "current_offset": current,
                "log_end_offset": end,
                "lag": None if current is None or end is None else max(end - current, 0),
                "consumer_id": None if member is None else str(member.member_id),
                "host": None if member is None else str(member.client_host),
                "client_id": None if member is None else str(member.client_id),
            }
        )
    return rows
