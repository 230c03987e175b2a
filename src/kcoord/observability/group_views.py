"""JSON views of the groups for ``/v1/groups`` and ``/v1/groups/{group}``.

Classic groups show their generation and rebalance history; consumer (KIP-848) groups show their
group and assignment epochs and each member's epoch, assignment and target assignment (their
epoch bumps are not kept as history yet); share (KIP-932) groups show their epochs, each member's
assignment (a partition may be assigned to several members) and, for each share partition this node
leads, its start offset, in-flight window and record counts by state, and lag. Classic and consumer
groups show the open transactions holding offsets of the group (TxnOffsetCommit, pending until the
marker) and the group's last ended transactions.

They read the shards' in-memory state synchronously on the event loop (the shards' own thread),
so a view is a consistent snapshot. Durations in a rebalance record are milliseconds; a phase
that has not ended is ``null``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kcoord.coordinator.classic.consumer_protocol import (
    PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE,
)
from kcoord.coordinator.classic.consumer_protocol import (
    ConsumerProtocolError,
    decode_assignment,
)
from kcoord.coordinator.classic.history import RebalanceRecord
from kcoord.coordinator.classic.messages import DescribedGroup, ListedGroup
from kcoord.coordinator.consumer.messages import DescribedConsumerGroup
from kcoord.coordinator.pending_offsets import OpenTransaction, SettledTransaction
from kcoord.coordinator.record_fields import TopicPartitions
from kcoord.coordinator.share.messages import DescribedShareGroup
from kcoord.coordinator.share.partition_state import SharePartitionView
from kcoord.protocol.errors import ErrorCode

DESCRIBE_VERSION = 5
"""DescribeGroups version the views ask the manager for (an unknown group comes back as Dead)."""

LogEndOffset = Callable[[str, int], int | None]
"""``(topic, partition) -> log end offset``, None when the partition does not exist."""

SharePartitions = Callable[[str], list[dict[str, Any]]]
"""``group -> [share partition view]``: what the share partitions' leader holds of the group
(``topic``, ``partition``, ``start_offset``, ``end_offset``, ``in_flight``, ``available``,
``acquired``, ``acknowledged``, ``archived``, ``lag``)."""


@dataclass(frozen=True, slots=True)
class ShareLookups:
    """What a share group's view needs beyond the shard: its share partitions and topic names."""

    partitions: SharePartitions
    topic_name: Callable[[uuid.UUID], str | None]


NO_SHARE_LOOKUPS = ShareLookups(lambda group_id: [], lambda topic_id: None)


def share_partition_rows(
    views: Mapping[tuple[uuid.UUID, int], SharePartitionView], topic_name: Callable[[uuid.UUID], str | None]
) -> list[dict[str, Any]]:
    """The share partitions' leader's views of one group as :data:`SharePartitions` rows; ``in_flight``
    is the window from the start offset to the end offset (records not all delivered yet)."""
    return [
        {
            "topic": topic_name(topic_id) or str(topic_id),
            "topic_id": str(topic_id),
            "partition": partition,
            "start_offset": view.start_offset,
            "end_offset": view.end_offset,
            "in_flight": view.end_offset - view.start_offset,
            "available": view.available,
            "acquired": view.acquired,
            "acknowledged": view.acknowledged,
            "archived": view.archived,
            "lag": view.lag,
        }
        for (topic_id, partition), view in views.items()
    ]


class ClassicView(Protocol):
    """What the views read of a shard's classic groups."""

    def list_groups(self, states_filter: Any = None) -> list[ListedGroup]: ...

    def describe_groups(self, group_ids: Iterable[str], api_version: int) -> list[DescribedGroup]: ...

    def rebalance_history(self, group_id: str) -> list[RebalanceRecord]: ...

    def generation_id(self, group_id: str) -> int | None: ...

    def has_group(self, group_id: str) -> bool: ...


class OffsetsView(Protocol):
    def group_offsets(self, group_id: str) -> dict[tuple[str, int], int]: ...

    def all_groups_with_offsets(self) -> list[str]: ...

    def open_transactions(self, group_id: str) -> list[OpenTransaction]: ...

    def settled_transactions(self, group_id: str) -> list[SettledTransaction]: ...


class ConsumerView(Protocol):
    """What the views read of a shard's consumer (KIP-848) groups."""

    def listed(self, states_filter: Any) -> list[tuple[str, str]]: ...

    def describe(self, group_id: str) -> DescribedConsumerGroup | None: ...


class ShareView(Protocol):
    """What the views read of a shard's share (KIP-932) groups."""

    def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str, str]]: ...

    def describe(self, group_ids: Iterable[str]) -> list[DescribedShareGroup]: ...


class ShardView(Protocol):
    @property
    def classic(self) -> ClassicView: ...

    @property
    def share(self) -> ShareView: ...

    @property
    def consumer(self) -> ConsumerView: ...

    @property
    def offsets(self) -> OffsetsView: ...


def _members_count(shard: ShardView, group_id: str) -> int:
    (described,) = shard.classic.describe_groups([group_id], DESCRIBE_VERSION)
    return len(described.members)


def list_groups(shards: Iterable[ShardView]) -> list[dict[str, Any]]:
    """One summary per group, sorted by group id."""
    summaries = []
    for shard in shards:
        for listed in shard.classic.list_groups():
            summaries.append(
                {
                    "group": listed.group_id,
                    "state": listed.state,
                    "protocol_type": listed.protocol_type,
                    "members": _members_count(shard, listed.group_id),
                    "generation": shard.classic.generation_id(listed.group_id),
                    "rebalances": len(shard.classic.rebalance_history(listed.group_id)),
                }
            )
        for group_id, _ in shard.consumer.listed(None):
            described = shard.consumer.describe(group_id)
            if described is not None:
                summaries.append(
                    {
                        "group": group_id,
                        "type": "consumer",
                        "state": described.state,
                        "protocol_type": "consumer",
                        "members": len(described.members),
                        "group_epoch": described.group_epoch,
                        "assignment_epoch": described.target_epoch,
                    }
                )
        for group_id, _, _ in shard.share.list_groups():
            (share_group,) = shard.share.describe([group_id])
            summaries.append(
                {
                    "group": group_id,
                    "type": "share",
                    "state": share_group.state,
                    "protocol_type": "share",
                    "members": len(share_group.members),
                    "group_epoch": share_group.epoch,
                    "assignment_epoch": share_group.assignment_epoch,
                }
            )
    return sorted(summaries, key=lambda summary: str(summary["group"]))


def decode_member_assignment(protocol_type: str, assignment: bytes) -> dict[str, list[int]] | None:
    """``{topic: [partitions]}`` of a consumer member's assignment; None when not decodable."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not assignment:
        return None
    try:
        decoded = decode_assignment(assignment)
    except ConsumerProtocolError:
        return None
    return {topic: sorted(partitions) for topic, partitions in decoded.assigned_partitions}


def rebalance_view(record: RebalanceRecord) -> dict[str, Any]:
    def between(start: int | None, end: int | None) -> int | None:
        return None if start is None or end is None else end - start

    return {
        "trigger": record.trigger,
        "reason": record.reason,
        "client_reasons": list(record.client_reasons),
        "outcome": record.outcome,
        "started_ms": record.started_ms,
        "generation_before": record.generation_before,
        "generation_after": record.generation_after,
        "join_ms": between(record.started_ms, record.join_completed_ms),
        "sync_ms": between(record.join_completed_ms, record.completed_ms),
        "total_ms": between(record.started_ms, record.completed_ms),
        "members_before": list(record.members_before),
        "members_after": list(record.members_after),
        "removed_not_rejoined": list(record.removed_not_rejoined),
        "removed_not_synced": list(record.removed_not_synced),
    }


def describe_group(
    shards: Iterable[ShardView],
    group_id: str,
    log_end_offset: LogEndOffset,
    share: ShareLookups = NO_SHARE_LOOKUPS,
) -> dict[str, Any] | None:
    """Members, assignments, committed offsets with lag, and history (share partitions for a share
    group); None for an unknown group."""
    for shard in shards:
        if shard.classic.has_group(group_id):
            return _describe(shard, group_id, log_end_offset)
        consumer_group = shard.consumer.describe(group_id)
        if consumer_group is not None:
            return _describe_consumer(shard, consumer_group, log_end_offset)
        (share_group,) = shard.share.describe([group_id])
        if share_group.error_code == ErrorCode.none:
            return _describe_share(share_group, share)
    return None


def _sorted_assignment(assignment: Any) -> dict[str, list[int]]:
    return {topic: sorted(parts) for topic, parts in sorted(assignment.items())}


def _describe_share(group: DescribedShareGroup, share: ShareLookups) -> dict[str, Any]:
    def named(assignment: TopicPartitions) -> dict[str, list[int]]:
        return {share.topic_name(topic_id) or str(topic_id): sorted(parts) for topic_id, parts in assignment}

    partitions = share.partitions(group.group_id)
    return {
        "group": group.group_id,
        "type": "share",
        "state": group.state,
        "protocol_type": "share",
        "group_epoch": group.epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor": group.assignor,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "subscribed_topics": list(m.subscribed_topic_names),
                "assignment": dict(sorted(named(m.assignment).items())),
            }
            for m in group.members
        ],
        "share_partitions": sorted(partitions, key=lambda p: (str(p["topic"]), int(p["partition"]))),
        "offsets": [],
        "rebalances": 0,
        "history": [],
    }


def _describe_consumer(
    shard: ShardView, group: DescribedConsumerGroup, log_end_offset: LogEndOffset
) -> dict[str, Any]:
    return {
        "group": group.group_id,
        "type": "consumer",
        "state": group.state,
        "protocol_type": "consumer",
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.target_epoch,
        "assignor": group.assignor,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "protocol": "classic" if m.uses_classic_protocol else "consumer",
                "subscribed_topics": list(m.subscribed_topics),
                "assignment": _sorted_assignment(m.assignment),
                "target_assignment": _sorted_assignment(m.target_assignment),
            }
            for m in group.members
        ],
        "offsets": _offsets(shard, group.group_id, log_end_offset),
        **_transactions(shard, group.group_id),
        "rebalances": len(group.history),
        "history": [
            {
                "epoch": bump.epoch,
                "trigger": bump.trigger,
                "member_id": bump.member_id,
                "started_ms": bump.started_ms,
                "reconcile_ms": bump.reconcile_ms,
            }
            for bump in group.history
        ],
    }


def _offsets(shard: ShardView, group_id: str, log_end_offset: LogEndOffset) -> list[dict[str, Any]]:
    offsets = []
    for (topic, partition), committed in sorted(shard.offsets.group_offsets(group_id).items()):
        end = log_end_offset(topic, partition)
        offsets.append(
            {
                "topic": topic,
                "partition": partition,
                "committed": committed,
                "log_end_offset": end,
                "lag": None if end is None else max(end - committed, 0),
            }
        )
    return offsets


def _transactions(shard: ShardView, group_id: str) -> dict[str, Any]:
    """The open transactions holding the group's offsets (pending until their marker), and the
    group's last ended transactions (its transactional commits and aborts)."""
    return {
        "open_transactions": [
            {
                "producer_id": txn.producer_id,
                "producer_epoch": txn.producer_epoch,
                "offsets": [{"topic": t, "partition": p, "offset": o} for t, p, o in txn.offsets],
            }
            for txn in shard.offsets.open_transactions(group_id)
        ],
        "transactions": [
            {
                "producer_id": txn.producer_id,
                "producer_epoch": txn.producer_epoch,
                "result": "commit" if txn.committed else "abort",
                "partitions": txn.partitions,
            }
            for txn in shard.offsets.settled_transactions(group_id)
        ],
    }


def _describe(shard: ShardView, group_id: str, log_end_offset: LogEndOffset) -> dict[str, Any]:
    (described,) = shard.classic.describe_groups([group_id], DESCRIBE_VERSION)
    members = [
        {
            "member_id": member.member_id,
            "group_instance_id": member.group_instance_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "assignment": decode_member_assignment(described.protocol_type, member.assignment),
        }
        for member in described.members
    ]
    offsets = _offsets(shard, group_id, log_end_offset)
    history = shard.classic.rebalance_history(group_id)
    return {
        "group": group_id,
        "state": described.state,
        "protocol_type": described.protocol_type,
        "protocol": described.protocol_data,
        "generation": shard.classic.generation_id(group_id),
        "members": members,
        "offsets": offsets,
        **_transactions(shard, group_id),
        "rebalances": len(history),
        "history": [rebalance_view(record) for record in history],
    }
