"""Every transaction state by every request: the answer, the record written and the state after it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.coordinator.transactions.txn_harness import CONFIG, TP0, TP2, TXN, TxnHarness

from kcoord.coordinator.transactions import InitProducerIdRequest, TransactionState
from kcoord.protocol.errors import ErrorCode

S = TransactionState
E = ErrorCode


def _empty(h: TxnHarness) -> None:
    h.init()


def _ongoing(h: TxnHarness) -> None:
    h.begin(TXN, TP0)


def _prepare(commit: bool) -> Callable[[TxnHarness], None]:
    def setup(h: TxnHarness) -> None:
        pid, epoch = h.begin(TXN, TP0)
        assert h.end(pid, epoch, commit=commit).error is E.none

    return setup


def _complete(commit: bool) -> Callable[[TxnHarness], None]:
    def setup(h: TxnHarness) -> None:
        _prepare(commit)(h)
        h.complete()

    return setup


def _fencing(h: TxnHarness) -> None:
    """Ongoing, and a new producer's InitProducerId is fencing it: its PrepareAbort not yet durable."""
    h.begin(TXN, TP0)
    h.shard.init_producer_id(InitProducerIdRequest(TXN, 60_000), "sink", h.now_ms)


def _expiring(h: TxnHarness) -> None:
    """Empty and idle past the expiration: its tombstone not yet durable."""
    h.init()
    h.advance(CONFIG.id_expiration_ms)
    assert len(h.shard.remove_expired(h.now_ms).records) == 1


SETUPS: dict[str, Callable[[TxnHarness], None]] = {
    "Empty": _empty,
    "Ongoing": _ongoing,
    "PrepareCommit": _prepare(True),
    "PrepareAbort": _prepare(False),
    "CompleteCommit": _complete(True),
    "CompleteAbort": _complete(False),
    "PrepareEpochFence": _fencing,
    "Dead": _expiring,
}
C, N, BAD = E.concurrent_transactions, E.none, E.invalid_txn_state
W, X = True, False  # the answer writes a record, or not
# state -> request -> (answer, writes a record, durable state after it)
TABLE: dict[str, dict[str, tuple[ErrorCode | None, bool, S]]] = {
    "Empty": {
        "init": (N, W, S.EMPTY), "add": (N, W, S.ONGOING), "offsets": (N, W, S.ONGOING),
        "commit": (BAD, X, S.EMPTY), "abort": (BAD, X, S.EMPTY), "markers": (None, X, S.EMPTY),
    },
    "Ongoing": {
        "init": (C, W, S.PREPARE_ABORT), "add": (N, W, S.ONGOING), "offsets": (N, W, S.ONGOING),
        "commit": (N, W, S.PREPARE_COMMIT), "abort": (N, W, S.PREPARE_ABORT), "markers": (None, X, S.ONGOING),
    },
    "PrepareCommit": {
        "init": (C, X, S.PREPARE_COMMIT), "add": (C, X, S.PREPARE_COMMIT),
        "offsets": (C, X, S.PREPARE_COMMIT),
        "commit": (C, X, S.PREPARE_COMMIT), "abort": (BAD, X, S.PREPARE_COMMIT),
        "markers": (None, W, S.COMPLETE_COMMIT),
    },
    "PrepareAbort": {
        "init": (C, X, S.PREPARE_ABORT), "add": (C, X, S.PREPARE_ABORT), "offsets": (C, X, S.PREPARE_ABORT),
        "commit": (BAD, X, S.PREPARE_ABORT), "abort": (C, X, S.PREPARE_ABORT),
        "markers": (None, W, S.COMPLETE_ABORT),
    },
    "CompleteCommit": {
        "init": (N, W, S.EMPTY), "add": (N, W, S.ONGOING), "offsets": (N, W, S.ONGOING),
        "commit": (N, X, S.COMPLETE_COMMIT), "abort": (BAD, X, S.COMPLETE_COMMIT),
        "markers": (None, X, S.COMPLETE_COMMIT),
    },
    "CompleteAbort": {
        "init": (N, W, S.EMPTY), "add": (N, W, S.ONGOING), "offsets": (N, W, S.ONGOING),
        "commit": (BAD, X, S.COMPLETE_ABORT), "abort": (N, X, S.COMPLETE_ABORT),
        "markers": (None, X, S.COMPLETE_ABORT),
    },
    "PrepareEpochFence": {
        "init": (C, X, S.ONGOING), "add": (C, X, S.ONGOING), "offsets": (C, X, S.ONGOING),
        "commit": (C, X, S.ONGOING), "abort": (C, X, S.ONGOING), "markers": (None, X, S.ONGOING),
    },
    "Dead": {
        "init": (C, X, S.EMPTY), "add": (C, X, S.EMPTY), "offsets": (C, X, S.EMPTY),
        "commit": (C, X, S.EMPTY), "abort": (C, X, S.EMPTY), "markers": (None, X, S.EMPTY),
    },
}  # fmt: skip


def _send(h: TxnHarness, request: str) -> ErrorCode | None:
    m = h.meta()
    pid, epoch = m.producer_id, m.producer_epoch
    if request == "init":
        return h.init().error  # type: ignore[no-any-return]
    if request == "add":
        return h.add(pid, epoch, TP2)  # type: ignore[no-any-return]
    if request == "offsets":
        return h.add_offsets(pid, epoch, "group-1")  # type: ignore[no-any-return]
    if request in ("commit", "abort"):
        return h.end(pid, epoch, commit=request == "commit").error  # type: ignore[no-any-return]
    assert not h.complete().responses
    return None


@pytest.mark.parametrize(
    ("state", "request_name"), [(state, request) for state, row in TABLE.items() for request in row]
)
def test_state_by_request(state: str, request_name: str) -> None:
    """The answer and the durable state after it are Kafka's for this state and request."""
    h = TxnHarness()
    SETUPS[state](h)
    assert (h.meta().pending or h.meta().state) == state
    written = len(h.log)
    expected_error, writes, expected_state = TABLE[state][request_name]
    assert _send(h, request_name) == expected_error
    assert len(h.log) - written == (1 if writes else 0)
    assert h.meta().state is expected_state


@pytest.mark.parametrize("state", [s for s in TABLE if s not in ("PrepareEpochFence", "Dead")])
@pytest.mark.parametrize("request_name", ["add", "offsets", "commit", "abort"])
def test_other_producers_are_refused_in_every_state(state: str, request_name: str) -> None:
    """A wrong producer id is INVALID_PRODUCER_ID_MAPPING, an old epoch PRODUCER_FENCED, in every state."""
    h = TxnHarness()
    SETUPS[state](h)
    m = h.meta()
    for pid, epoch, error in (
        (m.producer_id + 7, m.producer_epoch, E.invalid_producer_id_mapping),
        (m.producer_id, m.producer_epoch - 1, E.producer_fenced),
    ):
        if request_name == "add":
            answer = h.add(pid, epoch, TP2)
        elif request_name == "offsets":
            answer = h.add_offsets(pid, epoch, "g")
        else:
            answer = h.end(pid, epoch, commit=request_name == "commit").error
        assert answer is error
    assert h.meta().state is TransactionState(state)


@pytest.mark.parametrize("request_name", ["add", "offsets", "commit", "abort"])
def test_unknown_and_empty_transactional_ids(request_name: str) -> None:
    """An id the shard does not know is INVALID_PRODUCER_ID_MAPPING; an empty id is INVALID_REQUEST."""
    h = TxnHarness()
    for txn, error in (("nobody", E.invalid_producer_id_mapping), ("", E.invalid_request)):
        if request_name == "add":
            answer = h.add(1, 0, TP0, txn=txn)
        elif request_name == "offsets":
            answer = h.add_offsets(1, 0, "g", txn=txn)
        else:
            answer = h.end(1, 0, commit=request_name == "commit", txn=txn).error
        assert answer is error
    assert h.log == []
