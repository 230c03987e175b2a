"""The text of a group's timer key, ``<prefix><kind>:<len(group)>:<group>[:<member>]``, read back.

Each group kind owns the keys under its prefix (``classic:``, ``consumer:``) so the shard can
route a fired key to it. Group and member ids may contain any character, ``:`` included, so the
group id is written with its length. The kinds write their keys with f-strings of this form (the
heartbeat path makes one per heartbeat); reading one back is this module's.
"""

from __future__ import annotations

from collections.abc import Container

__all__ = ["split_group_timer_key"]


def split_group_timer_key(key: str, prefix: str, kinds: Container[str]) -> tuple[str, str, str | None] | None:
    """``(kind, group id, member id)`` of a key under ``prefix`` (member id None when the key has
    none), or None for a key that is not of that form or not of one of ``kinds``."""
    if not key.startswith(prefix):
        return None
    kind, _, rest = key[len(prefix) :].partition(":")
    length_text, _, rest = rest.partition(":")
    if kind not in kinds or not length_text.isdigit():
        return None
    length = int(length_text)
    group_id, rest = rest[:length], rest[length:]
    if len(group_id) != length:
        return None
    if not rest:
        return kind, group_id, None
    if not rest.startswith(":"):
        return None
    return kind, group_id, rest[1:]
