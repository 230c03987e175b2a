"""What share group operations take and answer: ShareGroupHeartbeat and ShareGroupDescribe."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kcoord.coordinator.consumer.messages import HeartbeatAnswer, MemberHeartbeat
from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.share.assignor import SIMPLE_ASSIGNOR
from kcoord.coordinator.share.group_records import TopicPartitions
from kcoord.protocol.errors import ErrorCode

__all__ = [
    "DescribedMember",
    "DescribedShareGroup",
    "ShareGroupChange",
    "ShareHeartbeatRequest",
    "ShareHeartbeatResponse",
]


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest(MemberHeartbeat):
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    """None: unchanged since the last heartbeat."""
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResponse(HeartbeatAnswer):
    assignment: TopicPartitions | None
    """None: unchanged (the client keeps what it has)."""
    error_code: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: TopicPartitions


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    """ShareGroupDescribe's answer for one group (``error_code`` GROUP_ID_NOT_FOUND: no such group)."""

    group_id: str
    error_code: ErrorCode
    state: str
    epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = SIMPLE_ASSIGNOR
    members: tuple[DescribedMember, ...] = ()


@dataclass(slots=True)
class ShareGroupChange(CoordinatorResult):
    """A :class:`CoordinatorResult` plus the share-partition state the share coordinator must now
    initialise (InitializeShareGroupState at ``state_epoch``, start offset -1: the leader picks it
    by ``share.auto.offset.reset`` at the first fetch) or delete (DeleteShareGroupState). Once the
    share coordinator answers, :meth:`ShareGroupManager.initialized` or
    :meth:`ShareGroupManager.deleted` records it."""

    state_epoch: int = -1
    initialize: dict[uuid.UUID, tuple[int, ...]] = field(default_factory=dict)
    delete: dict[uuid.UUID, tuple[int, ...]] = field(default_factory=dict)
