"""The transaction states: Kafka's id bytes, names and allowed transitions."""

from __future__ import annotations

import itertools

import pytest

from kcoord.coordinator.partitioner import java_string_hash
from kcoord.coordinator.transactions import TRANSACTION_STATE_TOPIC, partition_for
from kcoord.coordinator.transactions.state import TransactionState, can_transition

S = TransactionState
KAFKA_IDS = {
    "Empty": 0,
    "Ongoing": 1,
    "PrepareCommit": 2,
    "PrepareAbort": 3,
    "CompleteCommit": 4,
    "CompleteAbort": 5,
    "Dead": 6,
    "PrepareEpochFence": 7,
}
KAFKA_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_ids_and_names_are_kafkas() -> None:
    """Each state's log byte and name are Kafka's, and the byte reads back as the state."""
    assert {state.value: state.id for state in S} == KAFKA_IDS
    for state in S:
        assert S.from_id(state.id) is state
    with pytest.raises(ValueError):
        S.from_id(8)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S, S)))
def test_every_transition_is_allowed_exactly_as_in_kafka(source: S, target: S) -> None:
    """A transition is allowed if and only if Kafka lists the source among the target's previous states."""
    assert can_transition(source, target) == (source in KAFKA_PREVIOUS[target])


def test_expiration_is_allowed_only_with_no_transaction() -> None:
    """Only Empty, CompleteCommit and CompleteAbort ids may expire; only the Prepare states are completing."""
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert {s for s in S if s.completing} == {S.PREPARE_COMMIT, S.PREPARE_ABORT}


def test_transactional_id_partition_is_javas_hash_mod_partitions() -> None:
    """A transactional id's partition is abs(String.hashCode) % 50, Integer.MIN_VALUE giving 0."""
    assert TRANSACTION_STATE_TOPIC == "__transaction_state"
    assert java_string_hash("hello") == 99162322
    assert partition_for("hello", 50) == 99162322 % 50
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("txn-ü", 50) == abs(java_string_hash("txn-ü")) % 50
