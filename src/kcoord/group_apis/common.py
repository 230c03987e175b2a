"""Small helpers the group API modules share."""

from __future__ import annotations

import datetime
from typing import Any

from kcoord.coordinator.service import GroupCoordinator
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
