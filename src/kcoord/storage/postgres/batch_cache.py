"""The bytes of recently appended and recently read batches, bounded by one budget per node.

The PostgreSQL engine keeps every partition's batch *index* in memory (offsets, timestamps,
sizes: :class:`~kcoord.storage.postgres.segment.PostgresSegment`) but not the batches: their bytes
live in this cache, shared by every log of the store and bounded by
``kcoord.storage.postgres.cache.bytes``. What is missing is read from ``log_batches``.

Least recently used goes first. Appended batches enter at the hot end, so consumers at the head
of a log read from memory; batches read back from the database enter at the cold end (a consumer
catching up reads each batch once, and must not push the tail out). Entries are keyed by segment
(each segment object has its own token, so a compacted copy never serves its predecessor's bytes)
and position within it.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

__all__ = ["BatchCache"]

_tokens = itertools.count(1)


def new_segment_token() -> int:
    """A key no other segment of this process has (segments come and go with rolls and compaction)."""
    return next(_tokens)


class BatchCache:
    """An LRU map (segment token, position) -> batch bytes, at most ``capacity`` bytes in all."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError("cache capacity must be >= 0")
        self.capacity = capacity
        self.size = 0
        self._entries: OrderedDict[tuple[int, int], bytes] = OrderedDict()
        self._by_segment: dict[int, set[int]] = {}
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        """Entries pushed out to keep within ``capacity`` (dropped segments are not counted)."""

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, token: int, position: int) -> bytes | None:
        data = self._entries.get((token, position))
        if data is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end((token, position))
        return data

    def put(self, token: int, position: int, data: bytes, *, hot: bool = True) -> None:
        """Keep ``data``; ``hot``: as the most recently used entry, else as the next to go."""
        if len(data) > self.capacity:
            return
        key = (token, position)
        old = self._entries.pop(key, None)
        if old is not None:
            self.size -= len(old)
        self._entries[key] = data
        if not hot:
            self._entries.move_to_end(key, last=False)
        self._by_segment.setdefault(token, set()).add(position)
        self.size += len(data)
        self._evict()

    def drop_segment(self, token: int, from_position: int = 0) -> None:
        """Forget a segment's batches at or past ``from_position`` (deleted, truncated, replaced)."""
        positions = self._by_segment.get(token)
        if not positions:
            return
        for position in [p for p in positions if p >= from_position]:
            positions.discard(position)
            data = self._entries.pop((token, position), None)
            if data is not None:
                self.size -= len(data)
        if not positions:
            del self._by_segment[token]

    def _evict(self) -> None:
        while self.size > self.capacity and self._entries:
            (token, position), data = self._entries.popitem(last=False)
            self.size -= len(data)
            self.evictions += 1
            positions = self._by_segment.get(token)
            if positions is not None:
                positions.discard(position)
                if not positions:
                    del self._by_segment[token]
