"""The pure bookkeeping of one partition's transactions: open ones, last stable offset, aborted index."""

from __future__ import annotations

from kcoord.cluster.partition_transactions import (
    AbortedTransaction,
    PartitionTransactions,
    marker_of_batch,
)
from kcoord.protocol.control_batch import encode_marker_batch, encode_transactional_batch


def test_lso_is_high_watermark_without_open_transactions() -> None:
    """With nothing open the LSO is the high watermark."""
    assert PartitionTransactions().last_stable_offset(17) == 17


def test_lso_is_first_offset_of_oldest_open_transaction() -> None:
    """The LSO stops at the first offset of the oldest open transaction, whoever opened later."""
    txns = PartitionTransactions()
    assert txns.begin(1, 10)
    assert txns.begin(2, 4)
    assert not txns.begin(1, 12), "a second batch of an open transaction opens nothing"
    assert txns.last_stable_offset(20) == 4
    txns.end(2, 15, committed=True)
    assert txns.last_stable_offset(20) == 10
    txns.end(1, 16, committed=True)
    assert txns.last_stable_offset(20) == 20


def test_lso_never_passes_the_high_watermark() -> None:
    """A provisional first offset at the log end caps at the high watermark."""
    txns = PartitionTransactions({1: 30})
    assert txns.last_stable_offset(25) == 25


def test_lso_is_not_below_the_log_start() -> None:
    """An open transaction whose first records retention removed holds the LSO at the log start."""
    txns = PartitionTransactions({1: 3})
    assert txns.last_stable_offset(20, log_start_offset=8) == 8
    assert txns.last_stable_offset(20, log_start_offset=2) == 3


def test_abort_enters_the_index_and_commit_does_not() -> None:
    """Only an abort of an open transaction is indexed, with the marker's offset as its last offset."""
    txns = PartitionTransactions()
    txns.begin(1, 0)
    txns.begin(2, 1)
    assert txns.end(1, 5, committed=True) is None
    assert txns.end(2, 6, committed=False) == AbortedTransaction(2, 1, 6)
    assert txns.end(3, 7, committed=False) is None, "a marker with nothing open indexes nothing"
    assert txns.aborted == [AbortedTransaction(2, 1, 6)]


def test_aborted_between_selects_overlapping_transactions() -> None:
    """A fetch of [start, bound) gets the aborts with a marker at or after start that began before bound."""
    txns = PartitionTransactions(
        aborted=[AbortedTransaction(1, 0, 3), AbortedTransaction(2, 5, 9), AbortedTransaction(3, 20, 25)]
    )
    assert txns.aborted_between(0, 100) == txns.aborted
    assert txns.aborted_between(4, 10) == [AbortedTransaction(2, 5, 9)]
    assert txns.aborted_between(3, 5) == [AbortedTransaction(1, 0, 3)]
    assert txns.aborted_between(10, 20) == []
    assert txns.aborted_between(26, 30) == []


def test_provisional_first_offset_settles_or_cancels() -> None:
    """The log-end lower bound is replaced by the real base offset, or dropped when the append failed."""
    txns = PartitionTransactions()
    txns.begin(1, 8)
    txns.settle_first(1, 8, 11)
    assert txns.open == {1: 11}
    txns.settle_first(1, 8, 99)
    assert txns.open == {1: 11}, "only the provisional offset is replaced"
    txns.begin(2, 12)
    txns.cancel(2, 12)
    assert 2 not in txns.open


def test_trim_drops_aborts_below_the_log_start() -> None:
    """Retention past an abort marker removes its index entry."""
    txns = PartitionTransactions(aborted=[AbortedTransaction(1, 0, 3), AbortedTransaction(2, 5, 9)])
    assert txns.trim_before(4) == 1
    assert txns.aborted == [AbortedTransaction(2, 5, 9)]


def test_copy_is_independent() -> None:
    """A copy does not share its open set or index with the original."""
    txns = PartitionTransactions({1: 0})
    copy = txns.copy()
    copy.end(1, 4, committed=False)
    assert txns.open == {1: 0} and txns.aborted == []


def test_marker_of_batch_reads_commit_and_abort() -> None:
    """A control batch's marker is read back; a data batch holds none."""
    commit = encode_marker_batch(7, 1, True, 5, 1000).data
    abort = encode_marker_batch(7, 1, False, 6, 1000).data
    assert marker_of_batch(commit) == (True, 5)
    assert marker_of_batch(abort) == (False, 6)
    data = encode_transactional_batch([(b"k", b"v")], 7, 1, 1000).data
    assert marker_of_batch(data) is None
