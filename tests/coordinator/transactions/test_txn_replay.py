"""Replay is live: a fresh shard that loads the log holds what live operation built, and the views."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.coordinator.transactions.txn_harness import (
    CONFIG,
    TP0,
    TP1,
    TP2,
    TxnHarness,
    durable_view,
)

from kcoord.coordinator.transactions import (
    InitProducerIdRequest,
    ListTransactionsRequest,
    TransactionState,
    views,
)
from kcoord.coordinator.transactions.records import TransactionLogKey, TransactionRecord
from kcoord.protocol.errors import ErrorCode, KafkaError

E = ErrorCode
S = TransactionState
IDS = ("t0", "t1", "t2")
PARTITIONS = (TP0, TP1, TP2)

_ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["init", "recover", "add", "offsets", "commit", "abort", "complete", "stale", "tick", "expire"]
        ),
        st.integers(0, len(IDS) - 1),
        st.integers(0, 2),
    ),
    max_size=40,
)


def _run(h: TxnHarness, op: str, txn: str, arg: int) -> None:
    metadata = h.shard.transactions.get(txn)
    pid, epoch = (metadata.producer_id, metadata.producer_epoch) if metadata else (-1, -1)
    if op == "init":
        h.init(txn)
    elif op == "recover":
        h.init(txn, pid=pid, epoch=epoch)
    elif op == "add":
        h.add(pid, epoch, PARTITIONS[arg], txn=txn)
    elif op == "offsets":
        h.add_offsets(pid, epoch, f"group-{arg}", txn=txn)
    elif op in ("commit", "abort"):
        h.end(pid, epoch, commit=op == "commit", txn=txn)
    elif op == "complete":
        h.durable(h.shard.markers_written(txn, pid, epoch, h.now_ms))
    elif op == "stale":
        h.add(pid, epoch - 1, TP0, txn=txn)
    elif op == "tick":
        h.advance(20_000 * (arg + 1))
        h.durable(h.shard.abort_timed_out(h.now_ms))
    else:
        h.advance(CONFIG.id_expiration_ms // 2)
        h.durable(h.shard.remove_expired(h.now_ms))


@settings(max_examples=200, deadline=None)
@given(ops=_ops)
def test_replaying_the_log_rebuilds_what_live_operation_built(ops: list[tuple[str, int, int]]) -> None:
    """Any sequence of requests, completions, timeouts and expiries, replayed from its records into a
    fresh shard, gives every id the same durable metadata, with nothing pending."""
    h = TxnHarness()
    for op, index, arg in ops:
        _run(h, op, IDS[index], arg)
    assert all(m.pending is None for m in h.shard.transactions.values())
    assert durable_view(h.replayed()) == durable_view(h.shard)


def test_replay_of_a_tombstone_removes_and_an_unknown_tombstone_is_harmless() -> None:
    """A tombstone removes its id at load; one for an id never seen changes nothing."""
    h = TxnHarness()
    h.init("a")
    h.log.append(TransactionRecord(TransactionLogKey("a"), None))
    h.log.append(TransactionRecord(TransactionLogKey("never"), None))
    assert h.replayed().transactions == {}


def test_loaded_state_answers_as_live_state() -> None:
    """After a reload the same producer continues: its epoch is still current, a zombie's is not."""
    h = TxnHarness()
    zombie = h.init("a")
    current = h.init("a")
    fresh = TxnHarness(log=list(h.log), now_ms=h.now_ms)
    fresh.shard = h.replayed()
    assert fresh.add(zombie.producer_id, zombie.producer_epoch, TP0, txn="a") is E.producer_fenced
    assert fresh.add(current.producer_id, current.producer_epoch, TP0, txn="a") is E.none


def test_describe_shows_the_transaction_and_hides_unknown_or_expiring_ids() -> None:
    """DescribeTransactions: state, timeout, start, producer and partitions by topic; unknown,
    expiring and not-yet-written ids are TRANSACTIONAL_ID_NOT_FOUND; an empty id is INVALID_REQUEST."""
    h = TxnHarness()
    pid, epoch = h.begin("a", TP0, TP1, TP2)
    h.init("old")
    h.advance(CONFIG.id_expiration_ms)
    h.shard.remove_expired(h.now_ms)  # "old" is expiring (its tombstone not durable yet)
    h.shard.init_producer_id(InitProducerIdRequest("new", 1000), "sink", h.now_ms)  # not durable yet
    described = {d.transactional_id: d for d in h.shard.describe(["a", "missing", "old", "new", ""])}
    a = described["a"]
    assert (a.error, a.state, a.producer_id, a.producer_epoch) == (E.none, "Ongoing", pid, epoch)
    assert (a.timeout_ms, a.start_ms) == (60_000, h.now_ms - CONFIG.id_expiration_ms)
    assert a.topics == (("audit", (0,)), ("orders", (0, 1)))
    for txn in ("missing", "old", "new"):
        assert described[txn].error is E.transactional_id_not_found
    assert described[""].error is E.invalid_request


def test_list_filters_by_state_producer_and_duration() -> None:
    """ListTransactions filters by state names (unknown names reported), producer ids and duration."""
    h = TxnHarness()
    a_pid, _ = h.begin("a", TP0)
    h.advance(10_000)
    b_pid, b_epoch = h.begin("b", TP1)
    assert h.end(b_pid, b_epoch, commit=True, txn="b").error is E.none
    h.init("c")
    everything = h.shard.list_transactions(ListTransactionsRequest(), h.now_ms)
    assert [t[0] for t in everything.transactions] == ["a", "b", "c"]
    assert everything.unknown_state_filters == ()
    by_state = h.shard.list_transactions(
        ListTransactionsRequest(states=frozenset({"Ongoing", "PrepareCommit", "Bogus"})), h.now_ms
    )
    assert by_state.transactions == (("a", a_pid, "Ongoing"), ("b", b_pid, "PrepareCommit"))
    assert by_state.unknown_state_filters == ("Bogus",)
    by_producer = h.shard.list_transactions(
        ListTransactionsRequest(producer_ids=frozenset({b_pid})), h.now_ms
    )
    assert by_producer.transactions == (("b", b_pid, "PrepareCommit"),)
    long_running = h.shard.list_transactions(
        ListTransactionsRequest(states=frozenset({"Ongoing", "PrepareCommit"}), min_duration_ms=5_000),
        h.now_ms,
    )
    assert long_running.transactions == (("a", a_pid, "Ongoing"),)


def test_list_filters_by_a_pattern_the_whole_id_matches() -> None:
    """ListTransactions v2's pattern keeps the ids it matches in full, with the other filters; an
    empty or null pattern keeps all, and one that does not compile is INVALID_REGULAR_EXPRESSION."""
    h = TxnHarness()
    h.begin("orders-1", TP0)
    h.begin("orders-2", TP1)
    h.init("audit-orders")

    def listed(pattern: str | None, states: frozenset[str] = frozenset()) -> list[str]:
        listed = h.shard.list_transactions(ListTransactionsRequest(states=states), h.now_ms)
        return [t[0] for t in views.matching(listed, views.id_pattern(pattern)).transactions]

    assert listed("orders-.*") == ["orders-1", "orders-2"]
    assert listed("orders") == []
    assert listed(".*orders.*", frozenset({"Empty"})) == ["audit-orders"]
    assert listed("") == listed(None) == ["audit-orders", "orders-1", "orders-2"]
    with pytest.raises(KafkaError) as refused:
        views.id_pattern("orders-(")
    assert refused.value.code is E.invalid_regular_expression


def test_verify_partitions_for_a_transactional_produce() -> None:
    """KIP-890's check: partitions in the Ongoing transaction pass, others are TRANSACTION_ABORTABLE;
    a wrong producer, a fenced epoch or a decision being written refuse every partition."""
    h = TxnHarness()
    pid, epoch = h.begin("a", TP0)
    assert h.shard.verify_partitions("a", pid, epoch, [TP0, TP1]) == {
        TP0: E.none,
        TP1: E.transaction_abortable,
    }
    assert h.shard.verify_partitions("a", pid + 1, epoch, [TP0]) == {TP0: E.invalid_producer_id_mapping}
    assert h.shard.verify_partitions("zz", pid, epoch, [TP0]) == {TP0: E.invalid_producer_id_mapping}
    assert h.shard.verify_partitions("a", pid, epoch - 1, [TP0]) == {TP0: E.producer_fenced}
    h.end(pid, epoch, commit=True, txn="a")
    assert h.shard.verify_partitions("a", pid, epoch, [TP0]) == {TP0: E.concurrent_transactions}
    h.complete("a")
    assert h.shard.verify_partitions("a", pid, epoch, [TP0]) == {TP0: E.transaction_abortable}
