"""Which live node owns which partition: a pure, deterministic spread every node computes alike.

Each topic's partitions go round-robin over the live node ids in ascending order, starting at a
node picked by a stable hash of the topic name, so every topic is spread within one partition of
even and partition 0 of different topics does not always land on the same node. Every node that
sees the same live set computes the same answer; it is recomputed whenever membership changes.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

__all__ = ["assign"]


def assign(partitions: Iterable[tuple[str, int]], node_ids: Sequence[int]) -> dict[tuple[str, int], int]:
    """The owner of each partition among ``node_ids`` (empty when there is no node)."""
    nodes = sorted(set(node_ids))
    if not nodes:
        return {}
    return {
        (topic, partition): nodes[(zlib.crc32(topic.encode()) + partition) % len(nodes)]
        for topic, partition in partitions
    }
