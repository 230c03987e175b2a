"""Small helpers the group API modules share."""

from __future__ import annotations

import datetime
from typing import Any

from kcoord.runtime.service import GroupCoordinator
from kcoord.server.context import RequestContext


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    return ctx.app.coordinator


def millis(value: Any, default: int = -1) -> int:
    """kio decodes some durations as timedeltas; the core wants milliseconds."""
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)


def watch_member(ctx: RequestContext, group_id: str, member_id: str) -> None:
    """Tell the coordinator when this connection closes, once per member it carried.

    The close is only a hint (fast failover): the coordinator shortens the member's session if
    this was still the member's connection, and a member that reconnects keeps its place.
    """
    key = (group_id, member_id)
    connection = ctx.connection
    if key in connection.watched_members:
        return
    if not member_id or not ctx.app.settings["kcoord.fast.failover.enable"]:
        return
    connection.watched_members.add(key)
    service = coordinator(ctx)

    def closed() -> None:
        try:
            service.member_disconnected(group_id, member_id, connection.connection_id)
        except Exception:  # the partition may be gone or loading: the session timeout still applies
            return

    connection.on_close(closed)
