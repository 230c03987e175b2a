"""The shapes of the answer to a refused request.

Many APIs answer a refused request with its error code and empty lists (LeaveGroup's
``members``, ListGroups' ``groups``): :func:`code_and_empty`.

A request that names topics and their partitions is answered otherwise: when a whole request is
refused (a decode or authorization failure, an unexpected error), Kafka still answers every
partition it named, each with the error code. The per-partition answer differs by API; walking
the request's topics and partitions does not (:func:`each_partition`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.registry import ErrorResponder

__all__ = ["code_and_empty", "each_partition"]


def code_and_empty(*lists: str) -> ErrorResponder:
    """The error answer ``{"error_code": code, <each of lists>: []}``."""

    def answer(request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"error_code": code, **{name: [] for name in lists}}

    return answer


def each_partition(
    topics: Iterable[Any],
    answer: Callable[[int], dict[str, Any]],
    *,
    topic_field: str = "name",
    partition_field: str = "partition_index",
) -> list[dict[str, Any]]:
    """Every requested topic (named by ``topic_field``) with ``answer(index)`` for each of its
    partitions (indexed by ``partition_field``)."""
    return [
        {
            topic_field: getattr(topic, topic_field),
            "partitions": [answer(int(getattr(p, partition_field))) for p in topic.partitions],
        }
        for topic in topics
    ]
