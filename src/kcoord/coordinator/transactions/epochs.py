"""Producer ids and epochs of a transactional id: InitProducerId's rules and the epoch fence.

Kafka's ``prepareInitProducerIdTransit``, ``prepareIncrementProducerEpoch``,
``prepareProducerIdRotation`` and ``prepareFenceProducerEpoch``, as functions of the metadata
that return the value of the next record (the metadata itself only changes when it is durable):

- each InitProducerId bumps the epoch, which fences every producer holding an older one;
- an exhausted epoch (32766; 32767 is kept for fencing) moves the id to a new producer id at 0;
- KIP-360: a producer may present its id and epoch to recover. Its current epoch is bumped; the
  epoch before the last bump (a retry whose answer was lost) gets the current one again; the
  previous producer id with an exhausted epoch is a retry across a rotation; anything else is
  PRODUCER_FENCED;
- fencing an Ongoing transaction (InitProducerId, or its timeout) aborts it at a bumped epoch
  that no producer holds, with the abort markers written at that epoch.
"""

from __future__ import annotations

from kcoord.coordinator.transactions.messages import (
    InitProducerIdRequest,
    ProducerIdAllocator,
    TransactionResult,
    TxnMarker,
)
from kcoord.coordinator.transactions.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    epoch_exhausted,
)
from kcoord.coordinator.transactions.records import (
    TransactionLogKey,
    TransactionLogValue,
    TransactionRecord,
)
from kcoord.coordinator.transactions.state import TransactionState
from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = ["fence", "init_error", "markers_of", "next_producer", "record_of"]


def init_error(
    metadata: TransactionMetadata, expected: tuple[int, int], has_expected: bool
) -> ErrorCode | None:
    """Why InitProducerId cannot proceed now, in Kafka's order (None: it can)."""
    if metadata.pending is not None:
        return ErrorCode.concurrent_transactions
    if has_expected and not (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or expected[0] == metadata.producer_id
        or (expected[0] == metadata.previous_producer_id and epoch_exhausted(expected[1]))
    ):
        return ErrorCode.producer_fenced
    if metadata.state.completing:
        return ErrorCode.concurrent_transactions
    return None


def next_producer(
    metadata: TransactionMetadata,
    request: InitProducerIdRequest,
    has_expected: bool,
    allocator: ProducerIdAllocator,
    now_ms: int,
) -> TransactionLogValue:
    """The Empty record of a bumped epoch, or of a new producer id when the epoch is exhausted.

    Raises :class:`KafkaError` PRODUCER_FENCED for a stale presented epoch, or the allocator's."""
    expected_epoch = request.producer_epoch
    producer_id = metadata.producer_id
    if epoch_exhausted(metadata.producer_epoch) and (
        not has_expected or expected_epoch == metadata.producer_epoch
    ):
        producer_id = allocator.next_producer_id()
        epoch, last = 0, metadata.producer_epoch if has_expected else NO_PRODUCER_EPOCH
    elif not has_expected:
        epoch, last = metadata.producer_epoch + 1, NO_PRODUCER_EPOCH
    elif metadata.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == metadata.producer_epoch:
        epoch, last = metadata.producer_epoch + 1, metadata.producer_epoch
    elif expected_epoch == metadata.last_producer_epoch:
        epoch, last = metadata.producer_epoch, metadata.last_producer_epoch  # a retry of a bump
    else:
        raise KafkaError(ErrorCode.producer_fenced)
    return metadata.transit(
        TransactionState.EMPTY,
        now_ms,
        producer_id=producer_id,
        producer_epoch=epoch,
        last_producer_epoch=last,
        timeout_ms=request.timeout_ms,
        partitions=frozenset(),
        start_ms=-1,
    )


def fence(metadata: TransactionMetadata, now_ms: int) -> TransactionResult:
    """Abort the Ongoing transaction at a bumped epoch no producer holds (through PrepareEpochFence)."""
    epoch = min(metadata.producer_epoch + 1, MAX_PRODUCER_EPOCH)
    value = metadata.transit(
        TransactionState.PREPARE_ABORT,
        now_ms,
        producer_epoch=epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        through=TransactionState.PREPARE_EPOCH_FENCE,
    )
    result = TransactionResult(records=[record_of(metadata, value)])
    result.markers.extend(markers_of(metadata.transactional_id, value, committed=False))
    return result


def record_of(metadata: TransactionMetadata, value: TransactionLogValue) -> TransactionRecord:
    return TransactionRecord(TransactionLogKey(metadata.transactional_id), value)


def markers_of(transactional_id: str, value: TransactionLogValue, *, committed: bool) -> list[TxnMarker]:
    """One marker per partition of the decision ``value``, at its producer id and epoch."""
    return [
        TxnMarker(partition, value.producer_id, value.producer_epoch, committed, transactional_id)
        for partition in value.partitions or ()
    ]
