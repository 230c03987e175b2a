"""Liveness hints for kcoord's fast failover (not in Kafka).

Kafka removes a crashed consumer only when its session times out (45 s by default), although
the coordinator saw its connection close. kcoord treats that close as a hint: the member's
session deadline is pulled in to a grace period of about two heartbeat intervals, as observed
for that member, so a member that merely reconnects (and heartbeats again) keeps its place and a
dead one is gone in seconds. Static members keep the full session: surviving a restart is what
they asked for. These functions are pure; the manager applies them.
"""

from __future__ import annotations

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.group import ClassicGroupMember

_SMOOTHING = 0.5


def observe_activity(member: ClassicGroupMember, connection_id: int, now_ms: int, *, heartbeat: bool) -> None:
    """Record which connection carries the member, and learn its heartbeat interval."""
    if heartbeat:
        if member.last_heartbeat_ms is not None and member.connection_id == connection_id:
            interval = now_ms - member.last_heartbeat_ms
            if interval > 0:
                previous = member.heartbeat_interval_ms
                member.heartbeat_interval_ms = (
                    interval
                    if previous is None
                    else round(_SMOOTHING * interval + (1 - _SMOOTHING) * previous)
                )
        member.last_heartbeat_ms = now_ms
    member.connection_id = connection_id
    member.disconnected_ms = None


def disconnect_grace_ms(member: ClassicGroupMember, config: ClassicGroupConfig) -> int:
    """How long a member whose connection closed may take to come back."""
    interval = member.heartbeat_interval_ms or config.failover_default_heartbeat_ms
    return max(config.failover_grace_floor_ms, min(2 * interval, member.session_timeout_ms))


def should_shorten(member: ClassicGroupMember, connection_id: int, config: ClassicGroupConfig) -> bool:
    """Only a dynamic member whose *current* connection closed is hurried along."""
    return config.fast_failover and not member.is_static and member.connection_id == connection_id
