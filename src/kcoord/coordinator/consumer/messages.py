"""The consumer groups' requests and answers as the core sees them (topic names, not topic ids)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kcoord.coordinator.assignors.api import Assignment
from kcoord.coordinator.consumer.history import EpochBump

TopicFilter = Callable[[str], bool]
"""Whether the member's principal may see (DESCRIBE) a topic, by name."""


@dataclass(frozen=True, slots=True)
class MemberHeartbeat:
    """What every heartbeat of a KIP-848-style group (consumer or share) starts with: who beats, at
    which epoch (0 joins, -1 leaves)."""

    group_id: str
    member_id: str
    member_epoch: int


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    """What every such heartbeat's answer starts with: the member's id and epoch, and when to beat next."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest(MemberHeartbeat):
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    """-1: unchanged since the last heartbeat."""
    subscribed_topics: tuple[str, ...] | None = None
    """None: unchanged since the last heartbeat."""
    subscribed_topic_regex: str | None = None
    """None: unchanged; "": no regex any more."""
    server_assignor: str | None = None
    owned: Assignment | None = None
    """What the member consumes now; None: unchanged (not sent)."""
    client_id: str = ""
    client_host: str = ""
    topic_filter: TopicFilter | None = None
    """The topics a regex may resolve to (Kafka 4 resolves a regex only to topics the member's
    principal may DESCRIBE); None: every topic (no authorizer)."""


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResponse(HeartbeatAnswer):
    assignment: Assignment | None = None
    """None: the member's assignment did not change (the client keeps what it has)."""


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topics: tuple[str, ...]
    subscribed_regex: str | None
    assignment: Assignment
    target_assignment: Assignment
    uses_classic_protocol: bool = False
    """A member still speaking JoinGroup/SyncGroup/Heartbeat (a group migrating between protocols)."""


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    state: str
    group_epoch: int
    target_epoch: int
    assignor: str
    members: tuple[DescribedConsumerMember, ...] = field(default=())
    history: tuple[EpochBump, ...] = field(default=())
