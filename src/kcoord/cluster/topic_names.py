"""Kafka's rules for topic names, and the names kcoord reserves for itself.

A legal name is 1-249 characters from ``[a-zA-Z0-9._-]`` and is neither ``.`` nor ``..``
(Kafka's ``Topic.validate``; 249 leaves room for the partition suffix in a directory name).
"""

from __future__ import annotations

import re

from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "CONSUMER_OFFSETS",
    "INTERNAL_TOPICS",
    "MAX_NAME_LENGTH",
    "TRANSACTION_STATE",
    "check_topic_name",
    "topic_name_problem",
]

CONSUMER_OFFSETS = "__consumer_offsets"
"""The group coordinator's log; created by the coordinator, never by clients."""

TRANSACTION_STATE = "__transaction_state"
"""The transaction coordinator's log; created by the coordinator, never by clients."""

INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE, "__share_group_state"})
"""Names only kcoord itself may create or delete."""

MAX_NAME_LENGTH = 249

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


def check_topic_name(name: str | None) -> str:
    """``name`` itself when legal; otherwise ``KafkaError(INVALID_TOPIC_EXCEPTION)`` saying why."""
    problem = topic_name_problem(name)
    if problem is not None or name is None:
        raise KafkaError(ErrorCode.invalid_topic_exception, problem)
    return name
