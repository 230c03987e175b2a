"""Small helpers the group API modules share."""

from __future__ import annotations

import datetime
from typing import Any

from kcoord.apis.access import Op, may_topic
from kcoord.apis.wiring import OnePartApi
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatResponse
from kcoord.coordinator.share.messages import ShareHeartbeatResponse
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import ConnectionInfo, RequestContext


class GroupApi(OnePartApi[GroupService]):
    """A group API: its handler takes the group service (``groups``) and the authorizer."""

    __slots__ = ()
    part = "groups"


def millis(value: Any, default: int = -1) -> int:
    """kio decodes some durations as timedeltas; the core wants milliseconds."""
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)


def require_subscribed_topics(ctx: RequestContext, authorizer: Authorizer, names: Any) -> None:
    """Raises TOPIC_AUTHORIZATION_FAILED when the principal may not DESCRIBE a subscribed topic."""
    if not names:
        return
    denied = sorted({name for name in names if not may_topic(ctx, authorizer, Op.DESCRIBE, name)})
    if denied:
        raise KafkaError(
            ErrorCode.topic_authorization_failed, f"Topic DESCRIBE on {denied} is not authorized."
        )


def heartbeat_response(
    response: ConsumerHeartbeatResponse | ShareHeartbeatResponse,
    topic_partitions: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """A ConsumerGroupHeartbeat or ShareGroupHeartbeat answer (``topic_partitions`` None: no new one)."""
    return {
        "error_code": ErrorCode.none,
        "member_id": response.member_id,
        "member_epoch": response.member_epoch,
        "heartbeat_interval": response.heartbeat_interval_ms,
        "assignment": None if topic_partitions is None else {"topic_partitions": topic_partitions},
    }


class MemberWatch:
    """Tells the coordinator when a connection closes, once per member it carried.

    The close is only a hint (fast failover, ``kcoord.fast.failover.enable``): the coordinator
    shortens the member's session if this was still the member's connection, and a member that
    reconnects keeps its place. Disabled, it watches nothing.
    """

    def __init__(self, groups: GroupService, *, enabled: bool) -> None:
        self._groups = groups
        self._enabled = enabled

    def watch(self, connection: ConnectionInfo, group_id: str, member_id: str) -> None:
        key = (group_id, member_id)
        if key in connection.watched_members:
            return
        if not member_id or not self._enabled:
            return
        connection.watched_members.add(key)
        groups = self._groups

        def closed() -> None:
            try:
                groups.member_disconnected(group_id, member_id, connection.connection_id)
            except Exception:  # the partition may be gone or loading: the session timeout still applies
                return

        connection.on_close(closed)
