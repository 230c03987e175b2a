"""Which prefix of a ``__share_group_state`` partition a load no longer needs (Kafka's
``ShareCoordinatorOffsetsManager``).

A load rebuilds a share partition from its latest ShareSnapshot and the ShareUpdates written after
it. Everything below the oldest of the share partitions' latest snapshots is therefore redundant:
snapshots a newer one replaced, the updates those absorbed, and the records of deleted share
partitions. :class:`RedundantOffsets` follows the records one shard replays and answers that
offset (:meth:`RedundantOffsets.redundant_below`); the runtime moves the state log's start up to
it once the records it counted are durable.

A record replayed at load comes with its offset. A record written live does not know its offset
yet, only a lower bound: the log's end when its operation ran (:meth:`RedundantOffsets.written_from`),
since the log gives it an offset at or after that. A lower bound can only make the answer lower,
so it never names a record a load still needs; a load after a restart makes it exact again.
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ["RedundantOffsets"]


class RedundantOffsets:
    """Each share partition's latest snapshot offset (or a lower bound of it) on one state partition."""

    def __init__(self) -> None:
        self._snapshots: dict[Hashable, int] = {}
        self._floor = 0
        """No record replayed from now on has a lower offset (one past the last exact offset, or the
        log end an operation reported)."""

    def written_from(self, log_end: int) -> None:
        """The operation about to run writes at or after ``log_end`` (-1: not known)."""
        if log_end > self._floor:
            self._floor = log_end

    def replayed(self, key: Hashable, offset: int, snapshot: bool | None) -> None:
        """A record of ``key`` at ``offset`` (-1 for a live one: at or after the floor): a snapshot
        (True), an update (False) or a tombstone (None)."""
        at = offset if offset >= 0 else self._floor
        if snapshot is None:
            self._snapshots.pop(key, None)
        elif snapshot:
            self._snapshots[key] = at
        if offset >= 0 and offset + 1 > self._floor:
            self._floor = offset + 1

    def redundant_below(self) -> int:
        """The offset below which no record is needed: the oldest latest snapshot, or, with no share
        partition left, everything replayed so far."""
        snapshots = self._snapshots
        return min(snapshots.values()) if snapshots else self._floor
