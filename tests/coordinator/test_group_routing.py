"""The group-kind router: a group id belongs to the first registered kind that has it, else to the
default kind, and the offsets' view of a group asks that kind; a third kind is one registration."""

from __future__ import annotations

from kcoord.coordinator.classic.messages import DescribedGroup, HeartbeatRequest
from kcoord.coordinator.group_routing import GroupKind, GroupKinds, GroupsView
from kcoord.coordinator.records import CoordinatorRecord
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import ErrorCode


class NamedKind:
    """A kind of group that holds the ids it was given and answers with its own name."""

    def __init__(self, name: str, groups: set[str]) -> None:
        self.name = name
        self.groups = groups
        self.deleted: list[str] = []

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        api_version: int,
        now_ms: int,
    ) -> None:
        return None

    def group_state(self, group_id: str) -> str | None:
        return f"{self.name}-state" if group_id in self.groups else None

    def protocol_type(self, group_id: str) -> str | None:
        return self.name

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        return topic == self.name

    def empty_since_ms(self, group_id: str) -> int | None:
        return None

    def is_simple_or_missing(self, group_id: str) -> bool:
        return group_id not in self.groups

    def heartbeat_code(self, request: HeartbeatRequest, now_ms: int, connection_id: int) -> ErrorCode:
        return ErrorCode.none

    def member_disconnected(
        self, group_id: str, member_id: str, connection_id: int, now_ms: int
    ) -> CoordinatorResult:
        return CoordinatorResult()

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        return DescribedGroup(group_id, ErrorCode.none, f"{self.name}-state", self.name, "")

    def delete_group(self, group_id: str) -> list[CoordinatorRecord]:
        self.deleted.append(group_id)
        return []


def test_a_group_id_is_routed_to_the_kind_that_holds_it_else_to_the_default() -> None:
    """Each registered kind answers for its own groups; an unknown id goes to the default kind."""
    consumer = NamedKind("consumer", {"c"})
    share = NamedKind("share", {"s"})
    classic = NamedKind("classic", {"k"})
    kinds = GroupKinds(consumer, share, default=classic)
    view = GroupsView(kinds)
    registered: list[GroupKind] = [consumer, share, classic]
    assert [kinds.kind_of(g) for g in ("c", "s", "k", "new")] == [*registered, classic]
    assert [view.protocol_type(g) for g in ("c", "s", "k", "new")] == [
        "consumer",
        "share",
        "classic",
        "classic",
    ]
    assert view.group_state("s") == "share-state" and view.group_state("new") is None
    assert view.is_subscribed("s", "share") and not view.is_subscribed("c", "share")
    assert [kinds.exists(g) for g in ("c", "s", "k", "new")] == [True, True, True, False]
    kinds.kind_of("s").delete_group("s")
    assert share.deleted == ["s"] and not classic.deleted
