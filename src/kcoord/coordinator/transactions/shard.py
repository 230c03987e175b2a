"""One partition of ``__transaction_state``: the transactional ids it holds and their transactions.

The shard is pure (Kafka's ``TransactionCoordinator`` and ``TransactionStateManager`` for one
partition, without their locks and callbacks). Every handler takes a request, the sink that
stands for the waiting client and the time, and returns a :class:`TransactionResult`:

1. the record of the id's next metadata (or none, when the answer needs no change), whose
   transition is *pending* until the runtime reports it durable (:meth:`on_appended`);
2. the response, released by the runtime only after the record is durable;
3. the markers to write, for a decision (PrepareCommit/PrepareAbort): the shell writes them after
   the decision is durable and then calls :meth:`markers_written`, which writes CompleteCommit or
   CompleteAbort. A crash between the two leaves the decision in the log; :meth:`on_loaded`
   returns its markers again, so they are completed at load.

State changes only by records (:meth:`replay` at load, :meth:`on_appended` live), so a reload
rebuilds exactly what live operation built. Timers (two keys, armed at load) abort transactions
that outlive their timeout and remove ids idle for ``transactional.id.expiration.ms``.
Only the client-side transaction protocol (transaction version 1: EndTxn v0-v4, no epoch bump
per transaction) is served; KIP-890's epoch bump on every EndTxn (v5+) is not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kcoord.coordinator.partitioner import partition_for
from kcoord.coordinator.transactions import epochs, views
from kcoord.coordinator.transactions.epochs import markers_of, record_of
from kcoord.coordinator.transactions.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribedTransaction,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListedTransactions,
    ListTransactionsRequest,
    ProducerIdAllocator,
    TransactionConfig,
    TransactionResult,
    TxnMarker,
)
from kcoord.coordinator.transactions.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
)
from kcoord.coordinator.transactions.records import (
    TopicPartition,
    TransactionLogKey,
    TransactionRecord,
)
from kcoord.coordinator.transactions.state import TransactionState
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.timer.api import Timer

__all__ = ["ABORT_TIMED_OUT_KEY", "OFFSETS_TOPIC", "REMOVE_EXPIRED_KEY", "TransactionCoordinatorShard"]

OFFSETS_TOPIC = "__consumer_offsets"
ABORT_TIMED_OUT_KEY = "txn-abort-timed-out"
REMOVE_EXPIRED_KEY = "txn-remove-expired"

_State = TransactionState


class TransactionCoordinatorShard:
    def __init__(
        self, allocator: ProducerIdAllocator, config: TransactionConfig, timer: Timer | None = None
    ) -> None:
        self._allocator = allocator
        self.config = config
        self._timer = timer
        self.transactions: dict[str, TransactionMetadata] = {}

    # -- the runtime's contract

    def replay(
        self, record: TransactionRecord, offset: int = -1, producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        """One record of the log: the id's metadata is now its value (a tombstone removes it)."""
        transactional_id = record.key.transactional_id
        if record.value is None:
            self.transactions.pop(transactional_id, None)
            return
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            self.transactions[transactional_id] = TransactionMetadata.from_value(
                transactional_id, record.value
            )
        else:
            metadata.apply(record.value)

    def replay_end_transaction_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """``__transaction_state`` holds no transactional data, so it never holds a marker."""

    def on_appended(self, records: list[TransactionRecord]) -> None:
        for record in records:
            self.replay(record)

    def on_loaded(self, now_ms: int) -> TransactionResult:
        """Arm the two scans; return the markers of every decision whose markers may be unwritten."""
        if self._timer is not None:
            self._timer.schedule(ABORT_TIMED_OUT_KEY, now_ms + self.config.abort_timed_out_interval_ms)
            self._timer.schedule(REMOVE_EXPIRED_KEY, now_ms + self.config.remove_expired_interval_ms)
        result = TransactionResult()
        for metadata in self.transactions.values():
            if metadata.state.completing:
                result.markers.extend(_markers(metadata, metadata.state is _State.PREPARE_COMMIT))
        return result

    def on_timer(self, key: str, now_ms: int) -> TransactionResult:
        if key == ABORT_TIMED_OUT_KEY:
            self._reschedule(key, now_ms + self.config.abort_timed_out_interval_ms)
            return self.abort_timed_out(now_ms)
        if key == REMOVE_EXPIRED_KEY:
            self._reschedule(key, now_ms + self.config.remove_expired_interval_ms)
            return self.remove_expired(now_ms)
        return TransactionResult()

    def unload(self) -> TransactionResult:
        """Nothing parks here: every request is answered by its own result."""
        if self._timer is not None:
            self._timer.cancel(ABORT_TIMED_OUT_KEY)
            self._timer.cancel(REMOVE_EXPIRED_KEY)
        return TransactionResult()

    def _reschedule(self, key: str, deadline_ms: int) -> None:
        if self._timer is not None:
            self._timer.schedule(key, deadline_ms)

    # -- InitProducerId

    def init_producer_id(self, request: InitProducerIdRequest, sink: Any, now_ms: int) -> TransactionResult:
        """A new producer id or a bumped epoch for a transactional id, fencing the previous producer.

        1. An empty id, or only one of producer id and epoch, is INVALID_REQUEST; a timeout
           over ``transaction.max.timeout.ms`` (or not positive) is INVALID_TRANSACTION_TIMEOUT.
        2. A new id gets a producer id from the allocator and epoch 0.
        3. A pending transition or a decision whose markers are being written answers
           CONCURRENT_TRANSACTIONS (the client retries).
        4. An Ongoing transaction is aborted with a bumped epoch (the old producer is fenced)
           and the answer is CONCURRENT_TRANSACTIONS: the retry bumps the epoch again.
        5. Otherwise the epoch is bumped, or, when it is exhausted, a new producer id starts at
           epoch 0 (KIP-360); a producer presenting a stale id or epoch is PRODUCER_FENCED.
        """
        result = TransactionResult()
        expected = (request.producer_id, request.producer_epoch)
        if not request.transactional_id or (expected[0] == NO_PRODUCER_ID) != (
            expected[1] == NO_PRODUCER_EPOCH
        ):
            return _answer(result, sink, InitProducerIdResponse(ErrorCode.invalid_request))
        if not 0 < request.timeout_ms <= self.config.max_timeout_ms:
            return _answer(result, sink, InitProducerIdResponse(ErrorCode.invalid_transaction_timeout))
        has_expected = expected[0] != NO_PRODUCER_ID
        metadata = self.transactions.get(request.transactional_id)
        try:
            if metadata is None:
                metadata = TransactionMetadata.new(
                    request.transactional_id, self._allocator.next_producer_id(), request.timeout_ms, now_ms
                )
                self.transactions[request.transactional_id] = metadata
            error = epochs.init_error(metadata, expected, has_expected)
            if error is not None:
                return _answer(result, sink, InitProducerIdResponse(error))
            if metadata.state is _State.ONGOING:
                fence = epochs.fence(metadata, now_ms)
                fence.respond(sink, InitProducerIdResponse(ErrorCode.concurrent_transactions))
                return fence
            value = epochs.next_producer(metadata, request, has_expected, self._allocator, now_ms)
        except KafkaError as exc:
            return _answer(result, sink, InitProducerIdResponse(exc.code))
        result.records.append(record_of(metadata, value))
        result.respond(sink, InitProducerIdResponse(ErrorCode.none, value.producer_id, value.producer_epoch))
        return result

    # -- AddPartitionsToTxn, AddOffsetsToTxn

    def add_partitions(self, request: AddPartitionsToTxnRequest, sink: Any, now_ms: int) -> TransactionResult:
        """Add partitions to the transaction, starting it (Ongoing) if none is in progress."""
        return self._add(
            request.transactional_id, request.producer_id, request.producer_epoch,
            frozenset(request.partitions), sink, now_ms,
        )  # fmt: skip

    def add_offsets(self, request: AddOffsetsToTxnRequest, sink: Any, now_ms: int) -> TransactionResult:
        """Add the group's ``__consumer_offsets`` partition, where its TxnOffsetCommits will go."""
        partition = TopicPartition(
            OFFSETS_TOPIC, partition_for(request.group_id, self.config.offsets_topic_partitions)
        )
        return self._add(
            request.transactional_id, request.producer_id, request.producer_epoch,
            frozenset({partition}), sink, now_ms,
        )  # fmt: skip

    def _add(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        sink: Any,
        now_ms: int,
    ) -> TransactionResult:
        result = TransactionResult()
        metadata = self.transactions.get(transactional_id)
        error = self._producer_error(transactional_id, metadata, producer_id, producer_epoch)
        if error is None and metadata is not None:
            if metadata.pending is not None or metadata.state.completing:
                error = ErrorCode.concurrent_transactions
            elif metadata.state is _State.ONGOING and partitions <= metadata.partitions:
                error = ErrorCode.none  # nothing new: answer at once, write nothing
            else:
                start = now_ms if metadata.state.done else metadata.start_ms
                value = metadata.transit(
                    _State.ONGOING, now_ms, partitions=metadata.partitions | partitions, start_ms=start
                )
                result.records.append(record_of(metadata, value))
                error = ErrorCode.none
        result.respond(sink, error)
        return result

    def _producer_error(
        self,
        transactional_id: str,
        metadata: TransactionMetadata | None,
        producer_id: int,
        producer_epoch: int,
    ) -> ErrorCode | None:
        if not transactional_id:
            return ErrorCode.invalid_request
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced
        return None

    # -- EndTxn and the markers

    def end_txn(self, request: EndTxnRequest, sink: Any, now_ms: int) -> TransactionResult:
        """Commit or abort: the decision is written (PrepareCommit/PrepareAbort), then the markers.

        The answer is released once the decision is durable, before the markers are written, as
        Kafka does. A retry of a completed decision answers NONE; of one whose markers are still
        being written, CONCURRENT_TRANSACTIONS; the opposite decision, INVALID_TXN_STATE."""
        result = TransactionResult()
        metadata = self.transactions.get(request.transactional_id)
        error = self._producer_error(
            request.transactional_id, metadata, request.producer_id, request.producer_epoch
        )
        if error is not None or metadata is None:
            return _answer(result, sink, EndTxnResponse(error or ErrorCode.invalid_producer_id_mapping))
        if metadata.pending is not None:
            return _answer(result, sink, EndTxnResponse(ErrorCode.concurrent_transactions))
        state, commit = metadata.state, request.committed
        if state is _State.ONGOING:
            target = _State.PREPARE_COMMIT if commit else _State.PREPARE_ABORT
            value = metadata.transit(target, now_ms)
            result.records.append(record_of(metadata, value))
            result.markers.extend(markers_of(metadata.transactional_id, value, committed=commit))
            return _answer(
                result, sink, EndTxnResponse(ErrorCode.none, value.producer_id, value.producer_epoch)
            )
        same = (state in (_State.PREPARE_COMMIT, _State.COMPLETE_COMMIT)) == commit
        if state.completing and same:
            error = ErrorCode.concurrent_transactions
        elif state in (_State.COMPLETE_COMMIT, _State.COMPLETE_ABORT) and same:
            error = ErrorCode.none
        else:
            error = ErrorCode.invalid_txn_state
        producer = (metadata.producer_id, metadata.producer_epoch) if error is ErrorCode.none else ()
        return _answer(result, sink, EndTxnResponse(error, *producer))

    def markers_written(
        self, transactional_id: str, producer_id: int, producer_epoch: int, now_ms: int
    ) -> TransactionResult:
        """Every marker of the decision is written: complete it (CompleteCommit/CompleteAbort).

        A stale report (the id moved on, or is not completing) writes nothing."""
        result = TransactionResult()
        metadata = self.transactions.get(transactional_id)
        if (
            metadata is None
            or metadata.pending is not None
            or not metadata.state.completing
            or (metadata.producer_id, metadata.producer_epoch) != (producer_id, producer_epoch)
        ):
            return result
        target = _State.COMPLETE_COMMIT if metadata.state is _State.PREPARE_COMMIT else _State.COMPLETE_ABORT
        value = metadata.transit(
            target, now_ms, partitions=frozenset(), last_producer_epoch=metadata.producer_epoch
        )
        result.records.append(record_of(metadata, value))
        return result

    # -- what the coordinator starts itself

    def abort_timed_out(self, now_ms: int) -> TransactionResult:
        """Abort (fencing the producer) every Ongoing transaction older than its timeout."""
        result = TransactionResult()
        for metadata in self._settled(
            lambda m: m.state is _State.ONGOING and m.start_ms + m.timeout_ms < now_ms
        ):
            result.extend(epochs.fence(metadata, now_ms))
        return result

    def remove_expired(self, now_ms: int) -> TransactionResult:
        """A tombstone for every id with no transaction, idle past ``transactional.id.expiration.ms``."""
        idle_since_ms = now_ms - self.config.id_expiration_ms
        result = TransactionResult()
        for metadata in self._settled(
            lambda m: m.state.expiration_allowed and m.last_update_ms <= idle_since_ms
        ):
            metadata.pending = _State.DEAD
            result.records.append(TransactionRecord(TransactionLogKey(metadata.transactional_id), None))
        return result

    def _settled(self, due: Callable[[TransactionMetadata], bool]) -> Iterator[TransactionMetadata]:
        """The ids with no transition in flight that ``due`` picks (the timers' sweeps)."""
        return (
            metadata for metadata in self.transactions.values() if metadata.pending is None and due(metadata)
        )

    # -- operators

    def describe(self, transactional_ids: list[str]) -> list[DescribedTransaction]:
        return [
            views.describe(transactional_id, self.transactions.get(transactional_id))
            for transactional_id in transactional_ids
        ]

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """A transactional Produce's check: is each partition in this producer's transaction?"""
        return views.verify(self.transactions.get(transactional_id), producer_id, producer_epoch, partitions)

    def list_transactions(self, request: ListTransactionsRequest, now_ms: int) -> ListedTransactions:
        return views.list_transactions(self.transactions.values(), request, now_ms)


def _answer(result: TransactionResult, sink: Any, response: Any) -> TransactionResult:
    result.respond(sink, response)
    return result


def _markers(metadata: TransactionMetadata, committed: bool) -> list[TxnMarker]:
    return markers_of(metadata.transactional_id, metadata.to_value(), committed=committed)
