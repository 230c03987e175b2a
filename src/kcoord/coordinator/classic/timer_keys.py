"""Timer keys owned by the classic groups, and parsing them back.

Every key starts with ``classic:`` so the shard can route a fired key to this module; the form
is :mod:`kcoord.coordinator.group_timer_keys`': ``classic:<kind>:<len(group)>:<group>[:<member>]``.

Kinds:

- ``join``: the join phase deadline (initial delayed join or rebalance timeout);
- ``sync``: the pending-sync deadline (KAFKA-12890);
- ``session``: one member's session (also a pending member's and a new member's join timeout).
"""

from __future__ import annotations

from dataclasses import dataclass

from kcoord.coordinator.group_timer_keys import split_group_timer_key

PREFIX = "classic:"
JOIN = "join"
SYNC = "sync"
SESSION = "session"


@dataclass(frozen=True, slots=True)
class TimerTarget:
    kind: str
    group_id: str
    member_id: str | None = None


def join_key(group_id: str) -> str:
    return f"{PREFIX}{JOIN}:{len(group_id)}:{group_id}"


def sync_key(group_id: str) -> str:
    return f"{PREFIX}{SYNC}:{len(group_id)}:{group_id}"


def session_key(group_id: str, member_id: str) -> str:
    return f"{PREFIX}{SESSION}:{len(group_id)}:{group_id}:{member_id}"


def parse_key(key: str) -> TimerTarget | None:
    """The target of one of our keys, or None for a key this module does not own."""
    parts = split_group_timer_key(key, PREFIX, (JOIN, SYNC, SESSION))
    if parts is None:
        return None
    kind, group_id, member_id = parts
    if (member_id is None) != (kind != SESSION):
        return None  # a session key names its member; the group's join and sync keys do not
    return TimerTarget(kind, group_id, member_id)
