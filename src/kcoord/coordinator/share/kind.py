"""Share groups as one more kind of the group-kind router (:mod:`kcoord.coordinator.group_routing`).

Share groups share the group id namespace of classic and consumer groups but have no committed
offsets (their progress is the share-partition state) and speak neither classic protocol:

- an offset commit names a group that is not there for it: GROUP_ID_NOT_FOUND;
- a classic Heartbeat is UNKNOWN_MEMBER_ID, as Kafka answers for a group that is not classic;
- DescribeGroups describes it as a group it does not know (Dead; v6+ GROUP_ID_NOT_FOUND), as for
  consumer groups: ShareGroupDescribe is the share groups' describe;
- offsets never expire (nothing is committed);
- DeleteGroups is refused while members remain (GROUP_NOT_EMPTY) and otherwise tombstones the
  group; deleting its share-partition state is the share coordinator's, which the caller asks.
"""

from __future__ import annotations

from kcoord.coordinator.classic import admin
from kcoord.coordinator.classic.messages import DescribedGroup, HeartbeatRequest, ListedGroup
from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.share.manager import SHARE_PROTOCOL_TYPE, ShareGroupManager
from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = ["ShareKind"]


class ShareKind:
    """The router's :class:`~kcoord.coordinator.group_routing.GroupKind` for share groups."""

    def __init__(self, manager: ShareGroupManager) -> None:
        self._manager = manager
        self.has_group = manager.has_group

    def validate_offset_commit(
        self, group_id: str, member_id: str, instance: str | None, epoch: int, version: int, now_ms: int
    ) -> None:
        raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is a share group.")

    def validate_transactional_commit(
        self, group_id: str, member_id: str, instance: str | None, generation: int, now_ms: int
    ) -> None:
        """A share group keeps no committed offsets, inside a transaction or not (as OffsetCommit)."""
        raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is a share group.")

    def group_state(self, group_id: str) -> str | None:
        group = self._manager.group(group_id)
        return None if group is None else group.state

    def protocol_type(self, group_id: str) -> str | None:
        return SHARE_PROTOCOL_TYPE

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        group = self._manager.group(group_id)
        return group is not None and any(topic in m.subscribed_topic_names for m in group.members.values())

    def empty_since_ms(self, group_id: str) -> int | None:
        return None

    def is_simple_or_missing(self, group_id: str) -> bool:
        return False

    def heartbeat_code(self, request: HeartbeatRequest, now_ms: int, connection_id: int) -> ErrorCode:
        return ErrorCode.unknown_member_id

    def member_disconnected(
        self, group_id: str, member_id: str, connection_id: int, now_ms: int
    ) -> CoordinatorResult:
        """Share members go by their session timeout (their share sessions are the broker's)."""
        return CoordinatorResult()

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        """A share group is not a classic group: DescribeGroups sees it as a missing one."""
        return admin.describe(group_id, None, api_version)

    def delete_group(self, group_id: str) -> CoordinatorResult:
        """The change names the group's share state, which the share coordinator deletes."""
        return self._manager.delete_group(group_id)

    def listed_groups(self, states: tuple[str, ...] = ()) -> list[ListedGroup]:
        """ListGroups v5+: each share group with type "share" (protocol type "share")."""
        return [
            ListedGroup(group_id, protocol_type, state, group_type="share")
            for group_id, protocol_type, state in self._manager.list_groups(states)
        ]
