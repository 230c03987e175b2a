"""The deadlines of a shard's consumer-group members, and the connection behind each member.

A member has a session deadline (moved by every heartbeat; a classic member's own session timeout,
else the group's, which a group config may override), a rebalance deadline while it must revoke
partitions, and, for classic members, join and sync deadlines. A closed connection shortens a
dynamic member's session to a short grace (fast failover). All of it is soft state: rebuilt after
a load, never written.
"""

from __future__ import annotations

from kcoord.coordinator.consumer import timer_keys
from kcoord.coordinator.consumer.config import ConsumerGroupConfig
from kcoord.coordinator.consumer.group_configs import GroupConfigOverrides
from kcoord.coordinator.consumer.member import ConsumerGroupMember
from kcoord.timer.api import Timer


class MemberTimers:
    """Session, rebalance, join and sync deadlines on the shard's timer, and members' connections."""

    def __init__(self, timer: Timer, config: ConsumerGroupConfig, overrides: GroupConfigOverrides) -> None:
        self.timer = timer
        self._config = config
        self._overrides = overrides
        self._connections: dict[tuple[str, str], int] = {}
        """The connection that carried each member's last heartbeat."""

    def session_timeout_ms(self, group_id: str) -> int:
        return self._overrides.session_timeout_ms(group_id, self._config.session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._overrides.heartbeat_interval_ms(group_id, self._config.heartbeat_interval_ms)

    def schedule_session(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        """Move the member's session deadline: a classic member's own timeout, else the group's."""
        timeout = (
            member.classic.session_timeout_ms
            if member.classic is not None
            else self.session_timeout_ms(group_id)
        )
        self.timer.schedule(timer_keys.session_key(group_id, member.member_id), now_ms + timeout)

    def note_connection(self, group_id: str, member_id: str, connection_id: int) -> None:
        self._connections[(group_id, member_id)] = connection_id

    def connection_closed(self, group_id: str, member_id: str, connection_id: int, now_ms: int) -> None:
        """The dynamic member's connection closed: if it was its current one, its session ends after
        a short grace (at most the session it had)."""
        if self._connections.get((group_id, member_id)) != connection_id:
            return
        grace = max(
            self._config.failover_grace_floor_ms,
            min(2 * self.heartbeat_interval_ms(group_id), self.session_timeout_ms(group_id)),
        )
        key = timer_keys.session_key(group_id, member_id)
        current = self.timer.deadline(key)
        if current is None or now_ms + grace < current:
            self.timer.schedule(key, now_ms + grace)

    def cancel(self, group_id: str, member_id: str) -> None:
        """The member is gone: every deadline of it, and its connection, are forgotten."""
        self._connections.pop((group_id, member_id), None)
        self.timer.cancel(timer_keys.session_key(group_id, member_id))
        self.timer.cancel(timer_keys.rebalance_key(group_id, member_id))
        self.timer.cancel(timer_keys.join_key(group_id, member_id))
        self.timer.cancel(timer_keys.sync_key(group_id, member_id))

    def forget_connections(self) -> None:
        self._connections.clear()
