"""Timer keys owned by consumer groups: ``consumer:<kind>:<len(group)>:<group>:<member>``.

Kinds: ``session`` (the member's session; a heartbeat moves it) and ``rebalance`` (how long a
member may take to revoke partitions; set on entering ``unrevoked_partitions``); for members that
speak the classic protocol also ``join`` (told to rejoin, it must within its rebalance timeout)
and ``sync`` (after its JoinGroup, its SyncGroup must follow within its rebalance timeout).
"""

from __future__ import annotations

from dataclasses import dataclass

from kcoord.coordinator.group_timer_keys import split_group_timer_key

PREFIX = "consumer:"
SESSION = "session"
REBALANCE = "rebalance"
JOIN = "join"
SYNC = "sync"
KINDS = (SESSION, REBALANCE, JOIN, SYNC)


@dataclass(frozen=True, slots=True)
class TimerTarget:
    kind: str
    group_id: str
    member_id: str


def session_key(group_id: str, member_id: str) -> str:
    return f"{PREFIX}{SESSION}:{len(group_id)}:{group_id}:{member_id}"


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"{PREFIX}{REBALANCE}:{len(group_id)}:{group_id}:{member_id}"


def join_key(group_id: str, member_id: str) -> str:
    return f"{PREFIX}{JOIN}:{len(group_id)}:{group_id}:{member_id}"


def sync_key(group_id: str, member_id: str) -> str:
    return f"{PREFIX}{SYNC}:{len(group_id)}:{group_id}:{member_id}"


def parse_key(key: str) -> TimerTarget | None:
    """The target of one of our keys, or None for a key this module does not own."""
    parts = split_group_timer_key(key, PREFIX, KINDS)
    if parts is None:
        return None
    kind, group_id, member_id = parts
    return None if member_id is None else TimerTarget(kind, group_id, member_id)
