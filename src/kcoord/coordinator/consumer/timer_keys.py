"""Timer keys owned by consumer groups: ``consumer:<kind>:<len(group)>:<group>:<member>``.

Kinds: ``session`` (the member's session; a heartbeat moves it) and ``rebalance`` (how long a
member may take to revoke partitions; set on entering ``unrevoked_partitions``); for members that
speak the classic protocol also ``join`` (told to rejoin, it must within its rebalance timeout)
and ``sync`` (after its JoinGroup, its SyncGroup must follow within its rebalance timeout).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    if not key.startswith(PREFIX):
        return None
    kind, _, rest = key[len(PREFIX) :].partition(":")
    length_text, _, rest = rest.partition(":")
    if kind not in KINDS or not length_text.isdigit():
        return None
    length = int(length_text)
    group_id, rest = rest[:length], rest[length:]
    if len(group_id) != length or not rest.startswith(":"):
        return None
    return TimerTarget(kind, group_id, rest[1:])
