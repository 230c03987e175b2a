"""One data partition's transactions: the open ones, the last stable offset, the aborted index.

Kafka's ``ProducerStateManager`` keeps, per partition, each producer's *ongoing* transaction (the
offset of its first batch) and, per log segment, an index of *aborted* transactions
(producer id, first offset, last offset = the abort marker's offset). From those:

- the **last stable offset** (LSO) is the first offset of the oldest open transaction, or the high
  watermark when none is open: a read_committed consumer reads below it only;
- a read_committed Fetch returns, with its records, the aborted transactions that overlap the
  fetched range (``last_offset >= fetch offset`` and ``first_offset < upper bound``), and the
  consumer drops those producers' records from each first offset to the abort marker.

This module is pure (no I/O): :class:`PartitionTransactions` is fed by Produce (a transactional
batch opens its producer's transaction), by markers (which close it) and by the log scan at start
(:mod:`kcoord.cluster.producer_snapshots`), which replays the same two events in log order.

A first offset is *provisional* while the batch that opened the transaction is being appended: the
partition's log end when the append started, a lower bound of the offset it will get (offsets are
assigned in call order), so the LSO never runs ahead of data that is not yet settled.
:meth:`settle_first` replaces it with the real base offset when the append returns.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from kcoord.protocol.control_batch import ControlRecord, read_control_record
from kcoord.protocol.plain_batch import CorruptBatchError, iter_plain_records

__all__ = ["AbortedTransaction", "PartitionTransactions", "marker_of_batch"]


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """An aborted transaction on one partition: its producer, first data offset, abort marker offset."""

    producer_id: int
    first_offset: int
    last_offset: int


class PartitionTransactions:
    """The open transactions and the aborted index of one partition."""

    __slots__ = ("_aborted", "_aborted_ends", "open")

    def __init__(
        self, open_transactions: dict[int, int] | None = None, aborted: list[AbortedTransaction] | None = None
    ) -> None:
        self.open: dict[int, int] = dict(open_transactions or {})
        """Producer id -> first offset of its open transaction on this partition."""
        self._aborted: list[AbortedTransaction] = sorted(aborted or [], key=lambda a: a.last_offset)
        self._aborted_ends: list[int] = [a.last_offset for a in self._aborted]

    @property
    def aborted(self) -> list[AbortedTransaction]:
        """Every aborted transaction still indexed, by marker offset."""
        return list(self._aborted)

    def begin(self, producer_id: int, first_offset: int) -> bool:
        """A transactional batch of ``producer_id`` at (or, provisionally, not before) ``first_offset``.

        Opens the producer's transaction when none is open and returns True; else changes nothing."""
        if producer_id in self.open:
            return False
        self.open[producer_id] = first_offset
        return True

    def settle_first(self, producer_id: int, provisional: int, base_offset: int) -> None:
        """The batch that opened the transaction at ``provisional`` landed at ``base_offset``."""
        if self.open.get(producer_id) == provisional:
            self.open[producer_id] = base_offset

    def cancel(self, producer_id: int, provisional: int) -> None:
        """The append that opened the transaction at ``provisional`` failed: nothing of it is in the log."""
        if self.open.get(producer_id) == provisional:
            del self.open[producer_id]

    def end(self, producer_id: int, marker_offset: int, committed: bool) -> AbortedTransaction | None:
        """A marker of ``producer_id`` at ``marker_offset``: its open transaction ends here.

        An abort adds the transaction to the index (a marker with no open transaction adds nothing,
        as Kafka's ``completeTxn`` only indexes what it tracked). Returns the aborted entry."""
        first = self.open.pop(producer_id, None)
        if committed or first is None:
            return None
        entry = AbortedTransaction(producer_id, first, marker_offset)
        at = bisect.bisect_right(self._aborted_ends, marker_offset)
        self._aborted.insert(at, entry)
        self._aborted_ends.insert(at, marker_offset)
        return entry

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None when none is open."""
        return min(self.open.values()) if self.open else None

    def last_stable_offset(self, high_watermark: int, log_start_offset: int = 0) -> int:
        """The LSO: the oldest open transaction's first offset, capped by the high watermark; not
        below the log start (retention or DeleteRecords may remove a transaction's first records
        while it is open: Kafka's ``UnifiedLog`` lifts the first unstable offset to the log start)."""
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(max(first, log_start_offset), high_watermark)

    def aborted_between(self, fetch_offset: int, upper_bound: int) -> list[AbortedTransaction]:
        """Aborted transactions that overlap [``fetch_offset``, ``upper_bound``), as Kafka's
        ``collectAbortedTransactions``: marker at or after the fetch offset, first offset before
        the bound."""
        at = bisect.bisect_left(self._aborted_ends, fetch_offset)
        return [a for a in self._aborted[at:] if a.first_offset < upper_bound]

    def trim_before(self, log_start_offset: int) -> int:
        """Drop aborted entries whose marker is below the log start (retention removed them)."""
        at = bisect.bisect_left(self._aborted_ends, log_start_offset)
        if at:
            del self._aborted[:at]
            del self._aborted_ends[:at]
        return at

    def copy(self) -> PartitionTransactions:
        return PartitionTransactions(self.open, self._aborted)


def marker_of_batch(buf: bytes, pos: int = 0) -> ControlRecord | None:
    """The marker a control batch at ``pos`` holds (its first known control record), or None."""
    try:
        for _, key, value in iter_plain_records(buf, pos):
            record = read_control_record(key, value)
            if record is not None:
                return record
    except (CorruptBatchError, NotImplementedError):
        return None
    return None
