"""The eight states of a transactional id and the transitions Kafka allows between them.

Each state says what it accepts (Kafka's ``TransactionState``); the id byte is what the log's
``TransactionStatus`` holds and the name is what DescribeTransactions and ListTransactions show:

- **Empty** (0): a producer id and epoch, no transaction. AddPartitionsToTxn/AddOffsetsToTxn
  start one (Ongoing); EndTxn answers INVALID_TXN_STATE; InitProducerId bumps the epoch.
  The id may expire.
- **Ongoing** (1): partitions added. More may be added; EndTxn moves to PrepareCommit or
  PrepareAbort; InitProducerId or the transaction timeout fences the producer (PrepareEpochFence
  on the way to PrepareAbort with a bumped epoch).
- **PrepareCommit** (2) / **PrepareAbort** (3): the decision is durable, the markers are being
  written. A retried EndTxn of the same decision and everything else answer
  CONCURRENT_TRANSACTIONS; the other decision answers INVALID_TXN_STATE. The markers' completion
  moves on to CompleteCommit / CompleteAbort.
- **CompleteCommit** (4) / **CompleteAbort** (5): done; behaves as Empty, except that a retried
  EndTxn of the same decision answers NONE. The id may expire.
- **Dead** (6): the id is expiring (its tombstone is being written); never written as a value.
- **PrepareEpochFence** (7): the epoch is being bumped to fence a producer; a pending state only,
  never written (the record written is the PrepareAbort with the bumped epoch).
"""

from __future__ import annotations

import enum


class TransactionState(enum.StrEnum):
    """A ``str``: each state compares equal to Kafka's spelling ("Empty", "Ongoing", ...)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def id(self) -> int:
        """The ``TransactionStatus`` byte of the log."""
        return _IDS[self]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        try:
            return _BY_ID[state_id]
        except KeyError:
            raise ValueError(f"unknown transaction state id {state_id}") from None

    @property
    def expiration_allowed(self) -> bool:
        """Whether an idle id in this state may be removed (``transactional.id.expiration.ms``)."""
        return self in _EXPIRABLE

    @property
    def completing(self) -> bool:
        """Whether the decision is durable and its markers are being written."""
        return self in _COMPLETING

    @property
    def done(self) -> bool:
        """Empty, CompleteCommit or CompleteAbort: no transaction in progress."""
        return self in _EXPIRABLE


_IDS: dict[TransactionState, int] = {state: index for index, state in enumerate(TransactionState)}
_BY_ID: dict[int, TransactionState] = {index: state for state, index in _IDS.items()}
_EXPIRABLE = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)
_COMPLETING = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})

_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    TransactionState.EMPTY: _EXPIRABLE,
    TransactionState.ONGOING: _EXPIRABLE | {TransactionState.ONGOING},
    TransactionState.PREPARE_COMMIT: frozenset({TransactionState.ONGOING}),
    TransactionState.PREPARE_ABORT: frozenset(
        {TransactionState.ONGOING, TransactionState.PREPARE_EPOCH_FENCE}
    ),
    TransactionState.COMPLETE_COMMIT: frozenset({TransactionState.PREPARE_COMMIT}),
    TransactionState.COMPLETE_ABORT: frozenset({TransactionState.PREPARE_ABORT}),
    TransactionState.DEAD: _EXPIRABLE,
    TransactionState.PREPARE_EPOCH_FENCE: frozenset({TransactionState.ONGOING}),
}


def can_transition(source: TransactionState, target: TransactionState) -> bool:
    """Whether Kafka allows moving from ``source`` to ``target``."""
    return source in _VALID_PREVIOUS[target]
