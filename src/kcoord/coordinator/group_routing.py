"""Classic and consumer groups share one group id namespace; this is what routes between them.

The offset manager sees both kinds through one :class:`GroupView`; a request of one protocol to
a group of the other kind gets Kafka's error (:func:`classic_request_error`).
"""

from __future__ import annotations

from kcoord.coordinator.classic.manager import ClassicGroupManager
from kcoord.coordinator.consumer.manager import CONSUMER_PROTOCOL_TYPE, ConsumerGroupManager
from kcoord.protocol.errors import ErrorCode, KafkaError


class GroupsView:
    """The offsets' :class:`~kcoord.coordinator.offsets.GroupView` over both kinds of group."""

    def __init__(self, classic: ClassicGroupManager, consumer: ConsumerGroupManager) -> None:
        self._classic = classic
        self._consumer = consumer

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        api_version: int,
        now_ms: int,
    ) -> None:
        if self._consumer.has_group(group_id):
            self._consumer.validate_offset_commit(group_id, member_id, generation_id, api_version)
            return
        self._classic.validate_offset_commit(
            group_id, member_id, group_instance_id, generation_id, api_version, now_ms
        )

    def group_state(self, group_id: str) -> str | None:
        described = self._consumer.describe(group_id)
        if described is not None:
            return described.state
        state = self._classic.group_state(group_id)
        return None if state is None else str(state)

    def protocol_type(self, group_id: str) -> str | None:
        if self._consumer.has_group(group_id):
            return CONSUMER_PROTOCOL_TYPE
        return self._classic.protocol_type(group_id)

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        if self._consumer.has_group(group_id):
            return self._consumer.is_subscribed(group_id, topic)
        return self._classic.is_subscribed(group_id, topic)

    def empty_since_ms(self, group_id: str) -> int | None:
        if self._consumer.has_group(group_id):
            return None
        return self._classic.empty_since_ms(group_id)

    def is_simple_or_missing(self, group_id: str) -> bool:
        return not self._consumer.has_group(group_id) and self._classic.is_simple_or_missing(group_id)


def classic_request_error(consumer: ConsumerGroupManager, group_id: str, join: bool) -> None:
    """A classic request to a consumer group: INCONSISTENT_GROUP_PROTOCOL (join), else UNKNOWN_MEMBER_ID."""
    if consumer.has_group(group_id):
        code = ErrorCode.inconsistent_group_protocol if join else ErrorCode.unknown_member_id
        raise KafkaError(code, f"Group {group_id} is a consumer group.")
