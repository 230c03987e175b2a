"""Version-neutral requests and responses of the classic group APIs.

The edge decodes any supported wire version into these and encodes them back; behaviour that
depends on the version (MEMBER_ID_REQUIRED from JoinGroup v4, ``skip_assignment`` from v9,
GROUP_ID_NOT_FOUND in DescribeGroups v6+) is decided by the core from ``api_version``. Wire
details that are only framing (a null protocol name sent as ``""`` before JoinGroup v7, the
single-member LeaveGroup v0-2) stay at the edge.

Error codes are :class:`kio.schema.errors.ErrorCode` values; the handlers never raise for an
error the client should see, they answer it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

# One (name, metadata) pair per protocol the member supports, in preference order.
Protocols = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    # JoinGroup v0 has no rebalance timeout: the edge passes the session timeout (as Kafka does).
    rebalance_timeout_ms: int
    reason: str | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 9


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error_code: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    # Both None before v5.
    protocol_type: str | None = None
    protocol_name: str | None = None
    # (member id, assignment bytes); only the leader sends any.
    assignments: tuple[tuple[str, bytes], ...] = ()
    api_version: int = 5


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class HeartbeatRequest:
    """Not frozen, unlike its siblings: built for every heartbeat, the hot path of stable groups,
    and a frozen dataclass costs three times as much to construct."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True, slots=True)
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    """``error_code`` is the group-level error; per-member errors are in ``members``."""

    error_code: ErrorCode
    members: tuple[LeftMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error_code: ErrorCode
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class DeleteGroupResult:
    group_id: str
    error_code: ErrorCode
