"""One member of a consumer group and the states of its reconciliation.

A member has an epoch (the target assignment epoch it last caught up with), the partitions it is
assigned now, and the partitions it must still give up (pending revocation). Its state says what
it waits for:

- ``stable``: it holds exactly its target assignment at the target epoch;
- ``unrevoked_partitions``: it must first revoke partitions (its epoch does not advance until it
  reports that it no longer owns them);
- ``unreleased_partitions``: it is at the target epoch but some of its target partitions are still
  held by members that have not revoked them yet; it gets them once they are released.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kcoord.coordinator.assignors.api import Assignment
from kcoord.coordinator.records import ClassicMemberMetadata

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
JOIN_GROUP_MEMBER_EPOCH = 0


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topics: frozenset[str] = frozenset()
    subscribed_regex: str | None = None
    """A regular expression (whole-name match, as Kafka's RE2J ``matches``) over topic names."""
    regex_topics: frozenset[str] = frozenset()
    """The existing topics ``subscribed_regex`` matches, as last resolved (not a record)."""
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None
    """Set while the member speaks the classic protocol (a group migrating from or to classic)."""

    def with_changes(self, **changes: object) -> ConsumerGroupMember:
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def topics(self) -> frozenset[str]:
        """Every topic the member subscribes to: by name and through its regex."""
        return self.subscribed_topics | self.regex_topics

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    def owned(self) -> Assignment:
        """Everything the member may still be consuming: assigned plus pending revocation."""
        merged: dict[str, frozenset[int]] = dict(self.assigned)
        for topic, parts in self.pending_revocation.items():
            merged[topic] = merged.get(topic, frozenset()) | parts
        return merged
