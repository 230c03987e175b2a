"""Share groups registered in the group-kind router: what the offsets and the classic APIs see of them."""

from __future__ import annotations

import uuid

import pytest

from kcoord.coordinator.classic.messages import HeartbeatRequest, ListedGroup
from kcoord.coordinator.group_routing import GroupKind, GroupKinds, GroupsView
from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.kind import ShareKind
from kcoord.coordinator.share.manager import ShareGroupManager, ShareHeartbeatRequest
from kcoord.protocol.errors import ErrorCode, KafkaError

TOPIC = uuid.UUID(int=8)


class NoTimer:
    def schedule(self, key: str, deadline_ms: int) -> None:
        return None

    def cancel(self, key: str) -> None:
        return None

    def deadline(self, key: str) -> int | None:
        return None


class DefaultKind(ShareKind):
    """Stands in for the classic kind: the router's default, never holding the share group."""

    def __init__(self) -> None:
        super().__init__(ShareGroupManager(ShareGroupConfig(), NoTimer(), lambda name: None))


def manager_with_share_group() -> ShareGroupManager:
    manager = ShareGroupManager(ShareGroupConfig(), NoTimer(), {"t": (TOPIC, 1)}.get)
    manager.heartbeat(None, ShareHeartbeatRequest("sg", "m1", 0, None, ("t",)), 0)
    return manager


def test_the_router_finds_share_groups_and_the_offsets_view_asks_them() -> None:
    """With the share kind registered, a share group's id routes to it: state Stable, type share,
    subscribed to its topic; an offset commit to it is GROUP_ID_NOT_FOUND."""
    kind: GroupKind = ShareKind(manager_with_share_group())
    kinds = GroupKinds(kind, default=DefaultKind())
    assert kinds.kind_of("sg") is kind and kinds.exists("sg") and not kinds.exists("other")
    view = GroupsView(kinds)
    assert (view.group_state("sg"), view.protocol_type("sg")) == ("Stable", "share")
    assert view.is_subscribed("sg", "t") and not view.is_subscribed("sg", "u")
    assert view.empty_since_ms("sg") is None and not view.is_simple_or_missing("sg")
    with pytest.raises(KafkaError) as refused:
        view.validate_offset_commit("sg", "m1", None, 1, 9, 0)
    assert refused.value.code == ErrorCode.group_id_not_found


def test_classic_apis_see_a_share_group_as_not_theirs() -> None:
    """Heartbeat: UNKNOWN_MEMBER_ID; DescribeGroups: Dead (v6+ GROUP_ID_NOT_FOUND); ListGroups: type share;
    DeleteGroups: GROUP_NOT_EMPTY with members."""
    manager = manager_with_share_group()
    kind = ShareKind(manager)
    assert kind.heartbeat_code(HeartbeatRequest("sg", 1, "m1", None), 0, 1) == ErrorCode.unknown_member_id
    assert kind.describe_group("sg", 6).error_code == ErrorCode.group_id_not_found
    assert kind.describe_group("sg", 5).state == "Dead"
    assert kind.listed_groups() == [ListedGroup("sg", "share", "Stable", "share")]
    assert kind.member_disconnected("sg", "m1", 1, 0).records == []
    with pytest.raises(KafkaError) as busy:
        kind.delete_group("sg")
    assert busy.value.code == ErrorCode.non_empty_group
    manager.heartbeat(None, ShareHeartbeatRequest("sg", "m1", -1), 0)
    assert len(kind.delete_group("sg").records) == 3 and not kind.has_group("sg")
