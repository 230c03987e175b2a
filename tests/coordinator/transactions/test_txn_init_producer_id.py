"""InitProducerId with a transactional id: new ids, epoch bumps, fencing, timeouts and KIP-360 recovery."""

from __future__ import annotations

import dataclasses

import pytest
from tests.coordinator.transactions.txn_harness import CONFIG, TIMEOUT_MS, TP0, TP1, TXN, TxnHarness

from kcoord.coordinator.transactions import InitProducerIdRequest, TransactionState, TxnMarker
from kcoord.coordinator.transactions.metadata import MAX_PRODUCER_EPOCH
from kcoord.coordinator.transactions.records import TransactionLogKey, TransactionRecord
from kcoord.protocol.errors import ErrorCode

E = ErrorCode
S = TransactionState


def test_a_new_id_gets_a_fresh_producer_id_at_epoch_zero() -> None:
    """The first InitProducerId takes an id from the allocator and writes Empty at epoch 0."""
    h = TxnHarness()
    response = h.init()
    assert (response.error, response.producer_id, response.producer_epoch) == (E.none, 1000, 0)
    (record,) = h.log
    assert record.key.transactional_id == TXN
    assert record.value is not None
    assert (record.value.status, record.value.partitions, record.value.start_ms) == (0, None, -1)
    assert (record.value.timeout_ms, record.value.last_update_ms) == (TIMEOUT_MS, h.now_ms)


def test_each_init_bumps_the_epoch_and_fences_the_previous_producer() -> None:
    """A second instance gets epoch + 1; the first one's AddPartitions and EndTxn are PRODUCER_FENCED."""
    h = TxnHarness()
    first = h.init()
    second = h.init()
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
    assert h.add(first.producer_id, first.producer_epoch, TP0) is E.producer_fenced
    assert h.end(first.producer_id, first.producer_epoch, commit=True).error is E.producer_fenced
    assert h.add(second.producer_id, second.producer_epoch, TP0) is E.none


def test_init_fences_an_ongoing_transaction_by_aborting_it_first() -> None:
    """Ongoing: the transaction is aborted at a bumped epoch (markers to write) and the answer is
    CONCURRENT_TRANSACTIONS; once the abort completes, the retry bumps the epoch again."""
    h = TxnHarness()
    pid, epoch = h.begin(TXN, TP0, TP1)
    fence = h.shard.init_producer_id(InitProducerIdRequest(TXN, TIMEOUT_MS), "sink", h.now_ms)
    assert h.meta().pending is S.PREPARE_EPOCH_FENCE
    assert h.response(fence).error is E.concurrent_transactions
    assert h.meta().state is S.PREPARE_ABORT
    assert fence.markers == [
        TxnMarker(TP0, pid, epoch + 1, False, TXN),
        TxnMarker(TP1, pid, epoch + 1, False, TXN),
    ]
    assert h.init().error is E.concurrent_transactions  # the markers are still being written
    assert h.end(pid, epoch, commit=True).error is E.producer_fenced  # the zombie cannot commit
    h.complete()
    assert h.meta().state is S.COMPLETE_ABORT
    retry = h.init()
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.none, pid, epoch + 2)


@pytest.mark.parametrize("timeout_ms", [0, -5, CONFIG.max_timeout_ms + 1])
def test_a_timeout_out_of_range_is_invalid(timeout_ms: int) -> None:
    """transaction.timeout.ms must be positive and at most transaction.max.timeout.ms."""
    h = TxnHarness()
    assert h.init(timeout_ms=timeout_ms).error is E.invalid_transaction_timeout
    assert h.log == []
    assert h.init(timeout_ms=CONFIG.max_timeout_ms).error is E.none


def test_init_takes_the_new_timeout() -> None:
    """Each InitProducerId sets the transaction timeout the id's next transactions use."""
    h = TxnHarness()
    h.init(timeout_ms=1000)
    h.init(timeout_ms=2000)
    assert h.meta().timeout_ms == 2000


def test_empty_id_or_half_a_producer_is_an_invalid_request() -> None:
    """An empty transactional id, or a producer id without an epoch, is INVALID_REQUEST."""
    h = TxnHarness()
    assert h.init(txn="").error is E.invalid_request
    assert h.init(pid=5).error is E.invalid_request
    assert h.init(epoch=5).error is E.invalid_request


def test_an_allocator_failure_is_answered_and_nothing_is_kept() -> None:
    """No producer id ready: the allocator's error is the answer and the id is not created."""
    h = TxnHarness()
    h.allocator.fail_with = E.coordinator_load_in_progress
    assert h.init().error is E.coordinator_load_in_progress
    assert TXN not in h.shard.transactions
    h.allocator.fail_with = None
    assert h.init().producer_id == 1000


def test_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    """At epoch 32766 the next InitProducerId hands out a new producer id at epoch 0 (KIP-360)."""
    h = TxnHarness()
    h.init()
    _set_epoch(h, MAX_PRODUCER_EPOCH - 2)
    assert h.init().producer_epoch == MAX_PRODUCER_EPOCH - 1
    rotated = h.init()
    assert (rotated.producer_id, rotated.producer_epoch) == (1001, 0)
    assert h.meta().previous_producer_id == 1000


def test_fencing_at_the_last_usable_epoch_then_rotating() -> None:
    """A transaction at epoch 32766 is fenced at 32767 (kept for fencing); the retry gets a new id."""
    h = TxnHarness()
    pid, _ = h.begin(TXN, TP0)
    _set_epoch(h, MAX_PRODUCER_EPOCH - 1)
    assert h.init().error is E.concurrent_transactions
    assert h.meta().producer_epoch == MAX_PRODUCER_EPOCH
    h.complete()
    rotated = h.init()
    assert (rotated.producer_id, rotated.producer_epoch) == (pid + 1, 0)


def test_recovering_producer_with_its_current_epoch_gets_a_bump() -> None:
    """KIP-360: a producer presenting its current id and epoch gets epoch + 1."""
    h = TxnHarness()
    first = h.init()
    again = h.init(pid=first.producer_id, epoch=first.producer_epoch)
    assert (again.error, again.producer_epoch) == (E.none, first.producer_epoch + 1)


def test_a_retried_recovery_gets_the_same_epoch_back() -> None:
    """KIP-360: a retry presenting the epoch before the last bump gets the current epoch, not a bump."""
    h = TxnHarness()
    first = h.init()
    bumped = h.init(pid=first.producer_id, epoch=first.producer_epoch)
    retry = h.init(pid=first.producer_id, epoch=first.producer_epoch)
    assert (retry.error, retry.producer_epoch) == (E.none, bumped.producer_epoch)


def test_a_stale_producer_presenting_an_older_epoch_is_fenced() -> None:
    """KIP-360: an epoch that is neither current nor the last one is PRODUCER_FENCED, nothing written."""
    h = TxnHarness()
    first = h.init()
    h.init()
    h.init()
    written = len(h.log)
    assert h.init(pid=first.producer_id, epoch=first.producer_epoch).error is E.producer_fenced
    assert h.init(pid=first.producer_id + 50, epoch=0).error is E.producer_fenced
    assert len(h.log) == written


def test_retry_after_a_rotation_with_the_old_id_and_exhausted_epoch() -> None:
    """KIP-360: after a rotation, the old id with its exhausted epoch is a retry, not a zombie."""
    h = TxnHarness()
    first = h.init()
    _set_epoch(h, MAX_PRODUCER_EPOCH - 1)
    rotated = h.init(pid=first.producer_id, epoch=MAX_PRODUCER_EPOCH - 1)
    assert (rotated.error, rotated.producer_id, rotated.producer_epoch) == (E.none, 1001, 0)
    retry = h.init(pid=first.producer_id, epoch=MAX_PRODUCER_EPOCH - 1)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.none, 1001, 0)


def test_a_fresh_id_accepts_any_presented_producer() -> None:
    """An id with no epoch yet (just created) accepts the producer's presented id: it gets epoch 0."""
    h = TxnHarness()
    response = h.init(pid=77, epoch=3)
    assert (response.error, response.producer_id, response.producer_epoch) == (E.none, 1000, 0)


def _set_epoch(h: TxnHarness, epoch: int) -> None:
    """Bring the id to ``epoch`` through the log, as a long-lived producer would have."""
    value = dataclasses.replace(h.meta().to_value(), producer_epoch=epoch)
    record = TransactionRecord(TransactionLogKey(TXN), value)
    h.shard.replay(record)
    h.log.append(record)
