"""One transactional id's metadata, and the transitions that produce its next record.

The metadata is the replay of the id's records: :meth:`TransactionMetadata.apply` sets every
durable field from a record's value, whether the record was just appended (live) or read at load.
A handler never changes a durable field itself; it asks :meth:`TransactionMetadata.transit` for
the value of the next record, which checks the transition against the state table and marks it
*pending* until the record is durable (Kafka's ``pendingState``: while set, the id answers
CONCURRENT_TRANSACTIONS). Two things are soft, as in Kafka, whose records do not hold them:
the pending state and the last producer epoch (KIP-360: a retried InitProducerId whose epoch is
the last one gets the current epoch back, not PRODUCER_FENCED). Both are empty after a load.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from kcoord.coordinator.transactions.records import TopicPartition, TransactionLogValue
from kcoord.coordinator.transactions.state import TransactionState, can_transition

__all__ = [
    "MAX_PRODUCER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "TransactionMetadata",
    "epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 0x7FFF


def epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch (32767) for fencing: a producer at 32766 gets a new producer id."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


class IllegalTransitionError(RuntimeError):
    """A handler asked for a transition the state table forbids: a bug, never a client's doing."""


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    """Soft: the epoch before the last bump that a retried InitProducerId may still present."""
    pending: TransactionState | None = None
    """Soft: the state of a record on its way to the log."""
    pending_last_epoch: int = NO_PRODUCER_EPOCH
    """Soft: what ``last_producer_epoch`` becomes when the pending record is durable."""

    @classmethod
    def new(
        cls, transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int
    ) -> TransactionMetadata:
        """A fresh id before its first record (Kafka's metadata with epoch -1, state Empty)."""
        return cls(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            state=TransactionState.EMPTY,
            partitions=frozenset(),
            start_ms=-1,
            last_update_ms=now_ms,
        )

    @classmethod
    def from_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        metadata = cls.new(transactional_id, value.producer_id, value.timeout_ms, value.last_update_ms)
        metadata.apply(value)
        metadata.pending = None
        return metadata

    def apply(self, value: TransactionLogValue) -> None:
        """The record is durable (or loaded): it is the id's metadata now."""
        self.producer_id = value.producer_id
        self.producer_epoch = value.producer_epoch
        self.timeout_ms = value.timeout_ms
        self.state = TransactionState.from_id(value.status)
        empty = self.state is TransactionState.EMPTY  # Kafka reads no partitions for Empty
        self.partitions = frozenset() if empty else frozenset(value.partitions or ())
        self.start_ms = value.start_ms
        self.last_update_ms = value.last_update_ms
        self.previous_producer_id = value.previous_producer_id
        self.next_producer_id = value.next_producer_id
        self.client_transaction_version = value.client_transaction_version
        if self.pending is not None:
            self.last_producer_epoch = self.pending_last_epoch
        else:
            self.last_producer_epoch = NO_PRODUCER_EPOCH
        self.pending = None

    def to_value(self) -> TransactionLogValue:
        """The durable fields as a record value (what a reload of this id would produce)."""
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            status=self.state.id,
            partitions=None if self.state is TransactionState.EMPTY else tuple(sorted(self.partitions)),
            last_update_ms=self.last_update_ms,
            start_ms=self.start_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )

    def transit(
        self,
        target: TransactionState,
        now_ms: int,
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: frozenset[TopicPartition] | None = None,
        start_ms: int | None = None,
        through: TransactionState | None = None,
    ) -> TransactionLogValue:
        """The value of the record that moves this id to ``target``; marks it pending.

        ``through`` is a state passed on the way that is never written (PrepareEpochFence on the
        way from Ongoing to PrepareAbort); it becomes the pending state shown meanwhile.
        Unset fields keep their current values. The record's previous producer id is the
        current one, as Kafka writes it."""
        if self.pending is not None:
            raise IllegalTransitionError(f"{self.transactional_id}: {self.pending} still pending")
        path = (self.state, target) if through is None else (self.state, through, target)
        for source, step in itertools.pairwise(path):
            if not can_transition(source, step):
                raise IllegalTransitionError(f"{self.transactional_id}: {source} -> {step} is not allowed")
        new_partitions = self.partitions if partitions is None else partitions
        value = TransactionLogValue(
            producer_id=self.producer_id if producer_id is None else producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            status=target.id,
            partitions=None if target is TransactionState.EMPTY else tuple(sorted(new_partitions)),
            last_update_ms=now_ms,
            start_ms=self.start_ms if start_ms is None else start_ms,
            previous_producer_id=self.producer_id,
            client_transaction_version=self.client_transaction_version,
        )
        self.pending = target if through is None else through
        self.pending_last_epoch = (
            self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch
        )
        return value
