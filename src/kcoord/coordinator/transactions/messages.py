"""What the transaction coordinator's handlers take and give: requests, responses, markers, results.

The shapes are the coordinator's, not the wire's: the edge (one module per API) decodes a request
into one of these, and turns the response back into the version the client spoke. Two things the
edge adds: Kafka answers PRODUCER_FENCED to new clients and INVALID_PRODUCER_EPOCH to old ones
(:func:`fenced_error_for`), and AddPartitionsToTxn v0-v3 repeats the one error for every partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.transactions.records import TopicPartition, TransactionRecord
from kcoord.protocol.errors import ErrorCode

__all__ = [
    "AddOffsetsToTxnRequest",
    "AddPartitionsToTxnRequest",
    "DescribedTransaction",
    "EndTxnRequest",
    "EndTxnResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "ListTransactionsRequest",
    "ListedTransactions",
    "MarkerWriter",
    "ProducerIdAllocator",
    "TransactionConfig",
    "TransactionResult",
    "TxnMarker",
    "fenced_error_for",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

_FENCED_SINCE_VERSION = {"InitProducerId": 4, "EndTxn": 2, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2}
"""The first version of each API whose clients understand PRODUCER_FENCED (KIP-588)."""


def fenced_error_for(api: str, version: int, error: ErrorCode) -> ErrorCode:
    """``error`` as a client of ``api`` at ``version`` understands it (Kafka's KafkaApis mapping)."""
    if error is ErrorCode.producer_fenced and version < _FENCED_SINCE_VERSION.get(api, 0):
        return ErrorCode.invalid_producer_epoch
    return error


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """The broker settings the transaction coordinator follows (Kafka's names and defaults)."""

    max_timeout_ms: int = 900_000
    """``transaction.max.timeout.ms``: a longer ``transaction.timeout.ms`` is refused."""
    id_expiration_ms: int = 604_800_000
    """``transactional.id.expiration.ms``: an id idle this long (and not in a transaction) is removed."""
    abort_timed_out_interval_ms: int = 10_000
    """``transaction.abort.timed.out.transaction.cleanup.interval.ms``."""
    remove_expired_interval_ms: int = 3_600_000
    """``transaction.remove.expired.transaction.cleanup.interval.ms``."""
    offsets_topic_partitions: int = 50
    """``offsets.topic.num.partitions``: where AddOffsetsToTxn finds a group's offsets partition."""


class ProducerIdAllocator(Protocol):
    """Hands out producer ids without waiting (Kafka's ``ProducerIdManager.generateProducerId``).

    Raises :class:`~kcoord.protocol.errors.KafkaError` when no id is ready (Kafka answers
    COORDINATOR_LOAD_IN_PROGRESS while its next block is being fetched); the client retries."""

    def next_producer_id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    transactional_id: str
    timeout_ms: int
    producer_id: int = NO_PRODUCER_ID
    """v3+: the producer's current id and epoch, when it recovers from an error (KIP-360)."""
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class InitProducerIdResponse:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class AddPartitionsToTxnRequest:
    """One transaction of AddPartitionsToTxn v0-v3 (the client's own request, not verify-only)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class AddOffsetsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(frozen=True, slots=True)
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass(frozen=True, slots=True)
class EndTxnResponse:
    """v5+ (KIP-890) also carries the producer id and epoch; kcoord answers them unchanged."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True, order=True)
class TxnMarker:
    """One control batch to write: a commit or abort marker of a producer on one partition."""

    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    committed: bool
    transactional_id: str
    """The coordinator's id of the transaction; empty for a marker received by WriteTxnMarkers (the
    request carries none)."""


class MarkerWriter(Protocol):
    """Writes one transaction marker to its partition (contract A of issue 17).

    Implemented by the shell (``kcoord.cluster.transaction_markers.DataMarkerWriter`` for a data
    partition, ``kcoord.cluster.marker_routing``'s writers for this node's partitions and the
    cluster's); called by the transaction coordinator's marker dispatcher and the WriteTxnMarkers
    handler. ``coordinator_epoch``: the epoch the transactional id's coordinator holds its
    ``__transaction_state`` partition under (a partition refuses markers of an older one)."""

    async def write_marker(self, marker: TxnMarker, coordinator_epoch: int) -> ErrorCode: ...


@dataclass(slots=True)
class TransactionResult(CoordinatorResult):
    """Records to append, responses they unblock, and the markers to write once they are durable.

    ``markers`` are an output for the shell: only after ``records`` are durable (the decision)
    may it write them, each to its partition through the partition's owner; when all of one
    transaction's markers are written it calls the shard's ``markers_written``."""

    records: list[TransactionRecord] = field(default_factory=list)  # type: ignore[assignment]
    """``CoordinatorResult`` types its records as the offsets log's; this result holds this log's."""
    markers: list[TxnMarker] = field(default_factory=list)

    def extend(self, other: CoordinatorResult) -> None:
        super(TransactionResult, self).extend(other)
        if isinstance(other, TransactionResult):
            self.markers.extend(other.markers)


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    """One id of DescribeTransactions: NONE with the metadata, or TRANSACTIONAL_ID_NOT_FOUND."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class ListTransactionsRequest:
    """ListTransactions' filters; each left at its default filters nothing. v2's id pattern is
    applied by the edge, off the event loop, to what these select (``views.matching``)."""

    states: frozenset[str] = frozenset()
    """State names (a name that is no state is reported back as unknown)."""
    producer_ids: frozenset[int] = frozenset()
    min_duration_ms: int = -1
    """v1: only transactions running longer than this; -1 for all."""


@dataclass(frozen=True, slots=True)
class ListedTransactions:
    """ListTransactions of one shard: ``(transactional id, producer id, state)`` and unknown filters."""

    transactions: tuple[tuple[str, int, str], ...]
    unknown_state_filters: tuple[str, ...] = ()
