"""A classic consumer-group member for ``kcoord consume --group``: join, sync, heartbeat, commit, leave.

It subscribes to one topic with the ``range`` protocol, so it shares a group with Java,
librdkafka and kafka-python consumers that offer range (their default). When it leads, it
assigns every member's subscribed topics range-wise (Kafka's RangeAssignor: partitions split in
order, the first members taking one more). One thread does everything, so the caller must call
:meth:`heartbeat_due` between fetches; a long poll stays well under the session timeout.
"""

from __future__ import annotations

import time

from kcoord.cli.admin_client import AdminClient, AdminError, offset_commit_body
from kcoord.coordinator.classic.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import error_name

JOIN_GROUP_V = 5
SYNC_GROUP_V = 3
HEARTBEAT_V = 3
LEAVE_GROUP_V = 3
OFFSET_COMMIT_V = 8
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
HEARTBEAT_INTERVAL_S = 3.0
ASSIGNOR = "range"
_REJOIN_ERRORS = {"REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"}

Partition = tuple[str, int]


class RejoinRequiredError(Exception):
    """The group is rebalancing (or forgot this member): commit what is done and join again."""


def range_assign(
    subscriptions: dict[str, tuple[str, ...]], partitions: dict[str, int]
) -> dict[str, list[Partition]]:
    """Kafka's RangeAssignor: per topic, members in id order take contiguous ranges."""
    assigned: dict[str, list[Partition]] = {member: [] for member in subscriptions}
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        count = partitions.get(topic, 0)
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            assigned[member].extend((topic, p) for p in range(start, start + size))
            start += size
    return assigned


class GroupMember:
    """One member of ``group`` subscribed to ``topic``; :meth:`join` returns its partitions."""

    def __init__(self, client: AdminClient, group: str, topic: str) -> None:
        self._client = client
        self.group = group
        self.topic = topic
        self.member_id = ""
        self.generation = -1
        self._last_heartbeat = 0.0

    def join(self) -> list[Partition]:
        """JoinGroup (twice when the coordinator asks for a member id first), then SyncGroup."""
        subscription = encode_subscription(ConsumerSubscription(0, (self.topic,)))
        while True:
            response = self._client.coordinator_call(
                self.group,
                ApiKey.JOIN_GROUP,
                JOIN_GROUP_V,
                {
                    "group_id": self.group,
                    "session_timeout": SESSION_TIMEOUT_MS,
                    "rebalance_timeout": REBALANCE_TIMEOUT_MS,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                    "protocol_type": PROTOCOL_TYPE,
                    "protocols": [{"name": ASSIGNOR, "metadata": subscription}],
                },
            )
            error = error_name(int(response.error_code))
            if error == "MEMBER_ID_REQUIRED":
                self.member_id = str(response.member_id)
                continue
            if error == "UNKNOWN_MEMBER_ID":
                self.member_id = ""
                continue
            if error != "NONE":
                raise AdminError(f"JoinGroup {self.group}: {error}")
            break
        self.member_id = str(response.member_id)
        self.generation = int(response.generation_id)
        assignments = []
        if str(response.leader) == self.member_id:
            subscriptions = {
                str(m.member_id): decode_subscription(bytes(m.metadata)).topics for m in response.members
            }
            topics = sorted({t for ts in subscriptions.values() for t in ts})
            counts = self._client.partition_counts(topics)
            for member, owned in range_assign(subscriptions, counts).items():
                by_topic: dict[str, list[int]] = {}
                for topic, partition in owned:
                    by_topic.setdefault(topic, []).append(partition)
                encoded = encode_assignment(
                    ConsumerAssignment(0, tuple((t, tuple(ps)) for t, ps in sorted(by_topic.items())))
                )
                assignments.append({"member_id": member, "assignment": encoded})
        synced = self._client.coordinator_call(
            self.group,
            ApiKey.SYNC_GROUP,
            SYNC_GROUP_V,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": None,
                "assignments": assignments,
            },
        )
        error = error_name(int(synced.error_code))
        if error in _REJOIN_ERRORS:
            raise RejoinRequiredError(error)
        if error != "NONE":
            raise AdminError(f"SyncGroup {self.group}: {error}")
        self._last_heartbeat = time.monotonic()
        if not synced.assignment:
            return []
        assignment = decode_assignment(bytes(synced.assignment))
        return sorted((t, p) for t, ps in assignment.assigned_partitions for p in ps)

    def heartbeat_due(self) -> None:
        """Heartbeat once an interval has passed; :class:`RejoinRequiredError` when the group moved on."""
        if time.monotonic() - self._last_heartbeat < HEARTBEAT_INTERVAL_S:
            return
        response = self._client.coordinator_call(
            self.group,
            ApiKey.HEARTBEAT,
            HEARTBEAT_V,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": None,
            },
        )
        self._last_heartbeat = time.monotonic()
        error = error_name(int(response.error_code))
        if error in _REJOIN_ERRORS:
            raise RejoinRequiredError(error)
        if error != "NONE":
            raise AdminError(f"Heartbeat {self.group}: {error}")

    def commit(self, offsets: dict[Partition, int]) -> None:
        """Commit as this member of this generation (the next offset to read, as Kafka)."""
        if not offsets:
            return
        response = self._client.coordinator_call(
            self.group,
            ApiKey.OFFSET_COMMIT,
            OFFSET_COMMIT_V,
            offset_commit_body(self.group, self.generation, self.member_id, offsets),
        )
        for topic in response.topics:
            for part in topic.partitions:
                error = error_name(int(part.error_code))
                if error in _REJOIN_ERRORS:
                    raise RejoinRequiredError(error)
                if error != "NONE":
                    raise AdminError(f"OffsetCommit {self.group}: {error}")

    def leave(self) -> None:
        if not self.member_id:
            return
        self._client.coordinator_call(
            self.group,
            ApiKey.LEAVE_GROUP,
            LEAVE_GROUP_V,
            {"group_id": self.group, "members": [{"member_id": self.member_id, "group_instance_id": None}]},
        )
        self.member_id = ""
