"""Timer keys owned by the classic groups, and parsing them back.

Every key starts with ``classic:`` so the shard can route a fired key to this module. Group
and member ids may contain any character, including ``:``, so the group id is written with
its length: ``classic:<kind>:<len(group)>:<group>[:<member>]``.

Kinds:

- ``join``: the join phase deadline (initial delayed join or rebalance timeout);
- ``sync``: the pending-sync deadline (KAFKA-12890);
- ``session``: one member's session (also a pending member's and a new member's join timeout).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    if not key.startswith(PREFIX):
        return None
    kind, _, rest = key[len(PREFIX) :].partition(":")
    length_text, _, rest = rest.partition(":")
    if kind not in (JOIN, SYNC, SESSION) or not length_text.isdigit():
        return None
    length = int(length_text)
    group_id, rest = rest[:length], rest[length:]
    if len(group_id) != length:
        return None
    if kind == SESSION:
        if not rest.startswith(":"):
            return None
        return TimerTarget(kind, group_id, rest[1:])
    return TimerTarget(kind, group_id) if rest == "" else None
