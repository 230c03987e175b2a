"""The shape of an error answer to a request that names topics and their partitions.

When a whole request is refused (a decode or authorization failure, an unexpected error), Kafka
still answers every partition it named, each with the error code. The per-partition answer
differs by API; walking the request's topics and partitions does not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["each_partition"]


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
