"""Classic (pre-KIP-848) consumer groups: the pure state machine of one offsets-log partition.

:class:`ClassicGroupManager` is the entry point; the request and response types are in
:mod:`kcoord.coordinator.classic.messages`.
"""

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.history import ClassicGroupObserver, RebalanceRecord
from kcoord.coordinator.classic.manager import ClassicGroupManager
from kcoord.coordinator.classic.messages import (
    DeleteGroupResult,
    DescribedGroup,
    DescribedMember,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMember,
    LeftMember,
    ListedGroup,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kcoord.coordinator.classic.state import ClassicGroupState
from kcoord.coordinator.classic.timer_keys import PREFIX as TIMER_KEY_PREFIX

__all__ = [
    "TIMER_KEY_PREFIX",
    "ClassicGroupConfig",
    "ClassicGroupManager",
    "ClassicGroupObserver",
    "ClassicGroupState",
    "DeleteGroupResult",
    "DescribedGroup",
    "DescribedMember",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "LeavingMember",
    "LeftMember",
    "ListedGroup",
    "RebalanceRecord",
    "SyncGroupRequest",
    "SyncGroupResponse",
]
