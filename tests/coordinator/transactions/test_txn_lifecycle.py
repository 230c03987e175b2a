"""A transaction from start to end: partitions, offsets, the decision, its markers, timeouts, expiry."""

from __future__ import annotations

from tests.coordinator.transactions.txn_harness import CONFIG, TIMEOUT_MS, TP0, TP1, TP2, TXN, TxnHarness

from kcoord.coordinator.partitioner import partition_for
from kcoord.coordinator.transactions import (
    TopicPartition,
    TransactionConfig,
    TransactionState,
    TxnMarker,
    fenced_error_for,
)
from kcoord.coordinator.transactions.shard import ABORT_TIMED_OUT_KEY, REMOVE_EXPIRED_KEY
from kcoord.protocol.errors import ErrorCode

E = ErrorCode
S = TransactionState


def test_add_partitions_starts_the_transaction_and_accumulates() -> None:
    """The first add starts the transaction (its start time); later adds grow the set, same start."""
    h = TxnHarness()
    pid, epoch = h.begin(TXN, TP0)
    start = h.meta().start_ms
    h.advance(100)
    assert h.add(pid, epoch, TP1, TP2) is E.none
    assert h.meta().partitions == {TP0, TP1, TP2}
    assert (h.meta().start_ms, h.meta().last_update_ms) == (start, start + 100)


def test_adding_partitions_already_in_the_transaction_writes_nothing() -> None:
    """Ongoing with the partitions already added: NONE at once, no record."""
    h = TxnHarness()
    pid, epoch = h.begin(TXN, TP0, TP1)
    written = len(h.log)
    assert h.add(pid, epoch, TP1) is E.none
    assert len(h.log) == written


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    """AddOffsetsToTxn adds __consumer_offsets-partitionFor(group), where the commit marker must go."""
    h = TxnHarness(config=TransactionConfig(offsets_topic_partitions=7))
    response = h.init()
    assert h.add_offsets(response.producer_id, response.producer_epoch, "my-group") is E.none
    assert h.meta().partitions == {TopicPartition("__consumer_offsets", partition_for("my-group", 7))}


def test_commit_writes_the_decision_then_markers_then_completes() -> None:
    """EndTxn(commit): PrepareCommit is written and answered, the markers are an output, and
    reporting them written completes the transaction with no partitions."""
    h = TxnHarness()
    pid, epoch = h.begin(TXN, TP0, TP2)
    decision = h.end_result(pid, epoch, commit=True)
    assert [r.value.status for r in decision.records if r.value] == [S.PREPARE_COMMIT.id]
    assert decision.markers == [TxnMarker(TP2, pid, epoch, True, TXN), TxnMarker(TP0, pid, epoch, True, TXN)]
    assert h.response(decision).error is E.none
    assert h.meta().state is S.PREPARE_COMMIT
    h.advance(5)
    completion = h.complete()
    assert completion.markers == [] and completion.responses == []
    m = h.meta()
    assert (m.state, m.partitions, m.producer_epoch, m.last_update_ms) == (
        S.COMPLETE_COMMIT,
        frozenset(),
        epoch,
        h.now_ms,
    )


def test_abort_writes_abort_markers() -> None:
    """EndTxn(abort) writes PrepareAbort and abort markers, then CompleteAbort."""
    h = TxnHarness()
    pid, epoch = h.begin(TXN, TP1)
    decision = h.end_result(pid, epoch, commit=False)
    assert decision.markers == [TxnMarker(TP1, pid, epoch, False, TXN)]
    h.durable(decision)
    h.complete()
    assert h.meta().state is S.COMPLETE_ABORT


def test_a_stale_markers_report_writes_nothing() -> None:
    """A completion for another epoch, or for an id that is not completing, is ignored."""
    h = TxnHarness()
    pid, epoch = h.begin(TXN, TP0)
    assert h.shard.markers_written(TXN, pid, epoch, h.now_ms).records == []
    h.end(pid, epoch, commit=True)
    assert h.shard.markers_written(TXN, pid, epoch + 1, h.now_ms).records == []
    assert h.shard.markers_written("other", pid, epoch, h.now_ms).records == []
    assert h.meta().state is S.PREPARE_COMMIT


def test_next_transaction_after_completion() -> None:
    """After CompleteCommit the same producer starts the next transaction with a new start time."""
    h = TxnHarness()
    pid, epoch = h.begin(TXN, TP0)
    h.end(pid, epoch, commit=True)
    h.complete()
    h.advance(1000)
    assert h.add(pid, epoch, TP1) is E.none
    assert (h.meta().state, h.meta().partitions, h.meta().start_ms) == (S.ONGOING, frozenset({TP1}), h.now_ms)


def test_crash_between_decision_and_markers_completes_at_load() -> None:
    """The decision is durable but the markers never got written: a reload returns them again and
    their completion writes CompleteCommit."""
    h = TxnHarness()
    pid, epoch = h.begin(TXN, TP0, TP1)
    other_pid, other_epoch = h.begin("other", TP2)
    h.begin("quiet", TP2)
    assert h.end(pid, epoch, commit=True).error is E.none
    h.advance(TIMEOUT_MS + 1)
    h.durable(h.shard.abort_timed_out(h.now_ms))  # "other" and "quiet" time out: PrepareAbort, fenced
    h.complete("quiet")
    reloaded = TxnHarness(log=list(h.log), now_ms=h.now_ms + 10_000)
    for offset, record in enumerate(reloaded.log):
        reloaded.shard.replay(record, offset, -1, -1)
    loaded = reloaded.shard.on_loaded(reloaded.now_ms)
    assert loaded.records == [] and loaded.responses == []
    assert sorted(loaded.markers) == [
        TxnMarker(TP2, other_pid, other_epoch + 1, False, "other"),
        TxnMarker(TP0, pid, epoch, True, TXN),
        TxnMarker(TP1, pid, epoch, True, TXN),
    ]
    assert reloaded.meta().state is S.PREPARE_COMMIT
    assert reloaded.end(pid, epoch, commit=True).error is E.concurrent_transactions
    reloaded.complete()
    assert reloaded.meta().state is S.COMPLETE_COMMIT
    assert reloaded.meta("other").state is S.PREPARE_ABORT
    assert reloaded.meta("quiet").state is S.COMPLETE_ABORT


def test_load_arms_both_scans_and_they_rearm() -> None:
    """on_loaded schedules the timeout and expiry scans; each run schedules the next."""
    h = TxnHarness()
    h.shard.on_loaded(h.now_ms)
    assert h.timer.deadlines == {
        ABORT_TIMED_OUT_KEY: h.now_ms + CONFIG.abort_timed_out_interval_ms,
        REMOVE_EXPIRED_KEY: h.now_ms + CONFIG.remove_expired_interval_ms,
    }
    h.advance(CONFIG.abort_timed_out_interval_ms)
    h.shard.on_timer(ABORT_TIMED_OUT_KEY, h.now_ms)
    assert h.timer.deadlines[ABORT_TIMED_OUT_KEY] == h.now_ms + CONFIG.abort_timed_out_interval_ms
    h.shard.unload()
    assert h.timer.deadlines == {}
    assert h.shard.on_timer("unknown", h.now_ms).records == []


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    """An Ongoing transaction older than its timeout is aborted at a bumped epoch on the next scan."""
    h = TxnHarness()
    pid, epoch = h.begin(TXN, TP0)
    h.advance(TIMEOUT_MS // 2)
    h.begin("young", TP1)
    h.advance(TIMEOUT_MS - TIMEOUT_MS // 2)
    assert h.durable(h.shard.on_timer(ABORT_TIMED_OUT_KEY, h.now_ms)).records == []  # not *past* yet
    h.advance(1)
    result = h.durable(h.shard.on_timer(ABORT_TIMED_OUT_KEY, h.now_ms))
    assert result.responses == []
    assert result.markers == [TxnMarker(TP0, pid, epoch + 1, False, TXN)]
    assert (h.meta().state, h.meta().producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert h.add(pid, epoch, TP1) is E.producer_fenced
    assert h.end(pid, epoch, commit=True).error is E.producer_fenced
    h.complete()
    assert h.meta().state is S.COMPLETE_ABORT
    assert h.meta("young").state is S.ONGOING


def test_the_timeout_scan_skips_ids_with_a_pending_change() -> None:
    """An Ongoing transaction whose next record is on its way is left to that record."""
    h = TxnHarness()
    pid, epoch = h.begin(TXN, TP0)
    decision = h.end_result(pid, epoch, commit=True)
    h.advance(TIMEOUT_MS + 1)
    assert h.shard.abort_timed_out(h.now_ms).records == []
    h.durable(decision)
    assert h.shard.abort_timed_out(h.now_ms).records == []


def test_idle_ids_expire_with_a_tombstone() -> None:
    """An id with no transaction, idle for transactional.id.expiration.ms, is removed by a tombstone;
    an id in a transaction is kept however old."""
    h = TxnHarness()
    h.init("idle")
    h.begin("busy", TP0)
    h.advance(CONFIG.id_expiration_ms - 1)
    assert h.durable(h.shard.on_timer(REMOVE_EXPIRED_KEY, h.now_ms)).records == []
    h.advance(1)
    result = h.durable(h.shard.on_timer(REMOVE_EXPIRED_KEY, h.now_ms))
    assert [(r.key.transactional_id, r.value) for r in result.records] == [("idle", None)]
    assert set(h.shard.transactions) == {"busy"}
    assert h.init("idle").producer_id == 1002  # a new producer id: the id starts over


def test_fenced_error_for_old_clients_is_invalid_producer_epoch() -> None:
    """PRODUCER_FENCED goes to clients that know it; older versions get INVALID_PRODUCER_EPOCH."""
    assert fenced_error_for("InitProducerId", 3, E.producer_fenced) is E.invalid_producer_epoch
    assert fenced_error_for("InitProducerId", 4, E.producer_fenced) is E.producer_fenced
    for api in ("EndTxn", "AddPartitionsToTxn", "AddOffsetsToTxn"):
        assert fenced_error_for(api, 1, E.producer_fenced) is E.invalid_producer_epoch
        assert fenced_error_for(api, 2, E.producer_fenced) is E.producer_fenced
    assert fenced_error_for("EndTxn", 0, E.concurrent_transactions) is E.concurrent_transactions
