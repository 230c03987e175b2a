"""What operators see of a shard's transactions: DescribeTransactions and ListTransactions.

Read-only views of the metadata, as Kafka's coordinator builds them:

- DescribeTransactions: an unknown id (or one being removed, Dead) is TRANSACTIONAL_ID_NOT_FOUND;
  otherwise state, timeout, start time, producer id and epoch, and the partitions by topic.
- verification (AddPartitionsToTxn v4's verify-only form, KIP-890 part 1): before a
  transactional Produce is appended, each partition must already be in the producer's Ongoing
  transaction, else TRANSACTION_ABORTABLE; a wrong producer id is INVALID_PRODUCER_ID_MAPPING, a
  wrong epoch PRODUCER_FENCED and a decision being written CONCURRENT_TRANSACTIONS, for all.
- ListTransactions: every id except those being removed, filtered by state names (a name that
  is no state is reported back in ``unknown_state_filters``), by producer ids, (v1,
  ``DurationFilter``) by running for longer than the given milliseconds, -1 meaning no filter, and
  (v2, KIP-1152's ``TransactionalIdPattern``) by a regular expression the whole id matches, as
  KIP-848's topic regexes match topic names, with RE2 as Kafka's RE2J (:func:`id_pattern`: empty or
  null means no filter, one RE2 refuses is INVALID_REGULAR_EXPRESSION). :func:`matching` applies
  it to what the other filters listed, apart from the shard: RE2 is linear, but a crafted pattern
  still costs about a second per 32 KiB id, so the edge runs it on a worker thread (RE2 lets go of
  the GIL while it matches).
"""

from __future__ import annotations

from collections.abc import Iterable

from kcoord.coordinator.client_regex import ClientRegex, compile_client_regex
from kcoord.coordinator.transactions.messages import (
    DescribedTransaction,
    ListedTransactions,
    ListTransactionsRequest,
)
from kcoord.coordinator.transactions.metadata import TransactionMetadata
from kcoord.coordinator.transactions.records import TopicPartition
from kcoord.coordinator.transactions.state import TransactionState
from kcoord.protocol.errors import ErrorCode

__all__ = ["describe", "id_pattern", "list_transactions", "matching", "verify"]

_BY_NAME = {state.value: state for state in TransactionState}


def describe(transactional_id: str, metadata: TransactionMetadata | None) -> DescribedTransaction:
    if not transactional_id:
        return DescribedTransaction(transactional_id, ErrorCode.invalid_request)
    if metadata is None or _removing(metadata):
        return DescribedTransaction(transactional_id, ErrorCode.transactional_id_not_found)
    topics: dict[str, list[int]] = {}
    for partition in sorted(metadata.partitions):
        topics.setdefault(partition.topic, []).append(partition.partition)
    return DescribedTransaction(
        transactional_id=transactional_id,
        error=ErrorCode.none,
        state=metadata.state.value,
        timeout_ms=metadata.timeout_ms,
        start_ms=metadata.start_ms,
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        topics=tuple((topic, tuple(ids)) for topic, ids in topics.items()),
    )


def verify(
    metadata: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """Whether each partition is in the producer's transaction (Kafka's verification of a Produce)."""
    if metadata is None or _removing(metadata) or metadata.producer_id != producer_id:
        error = ErrorCode.invalid_producer_id_mapping
    elif metadata.producer_epoch != producer_epoch:
        error = ErrorCode.producer_fenced
    elif metadata.state.completing:
        error = ErrorCode.concurrent_transactions
    else:
        return {
            tp: ErrorCode.none if tp in metadata.partitions else ErrorCode.transaction_abortable
            for tp in partitions
        }
    return dict.fromkeys(partitions, error)


def list_transactions(
    transactions: Iterable[TransactionMetadata], request: ListTransactionsRequest, now_ms: int
) -> ListedTransactions:
    wanted = {_BY_NAME[name] for name in request.states if name in _BY_NAME}
    unknown = tuple(sorted(name for name in request.states if name not in _BY_NAME))
    min_duration_ms = request.min_duration_ms
    listed = tuple(
        (metadata.transactional_id, metadata.producer_id, metadata.state.value)
        for metadata in transactions
        if not _removing(metadata)
        and (not request.producer_ids or metadata.producer_id in request.producer_ids)
        and (not request.states or metadata.state in wanted)
        and (min_duration_ms < 0 or now_ms - metadata.start_ms > min_duration_ms)
    )
    return ListedTransactions(tuple(sorted(listed)), unknown)


def id_pattern(pattern: str | None) -> ClientRegex | None:
    """ListTransactions v2's ``TransactionalIdPattern``, compiled; None (no filter) when empty or null."""
    return compile_client_regex(pattern, "Transaction ID pattern") if pattern else None


def matching(listed: ListedTransactions, ids: ClientRegex | None) -> ListedTransactions:
    """The listed transactions whose id ``ids`` matches in full (all of them when None)."""
    if ids is None:
        return listed
    kept = tuple(entry for entry in listed.transactions if ids.matches(entry[0]))
    return ListedTransactions(kept, listed.unknown_state_filters)


def _removing(metadata: TransactionMetadata) -> bool:
    """Dead (its tombstone on the way) or never written (a new id's first record on the way)."""
    return (
        metadata.pending is TransactionState.DEAD
        or metadata.state is TransactionState.DEAD
        or (metadata.producer_epoch < 0)
    )
