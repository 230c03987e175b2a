"""Small helpers the group API modules share."""

from __future__ import annotations

import datetime
from typing import Any

from kcoord.runtime.group_service import GroupService
from kcoord.server.context import ConnectionInfo


def millis(value: Any, default: int = -1) -> int:
    """kio decodes some durations as timedeltas; the core wants milliseconds."""
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)


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
