"""The transaction coordinator's wiring on the generic runtime: ``__transaction_state`` and its shards.

The second instance of :class:`~kcoord.runtime.service.CoordinatorService` (the group coordinator
is the first): transactional ids live on partition ``abs(javaStringHashCode(id)) % partitions``
of ``__transaction_state`` (50 by ``transaction.state.log.num.partitions``), each partition's ids
in one :class:`~kcoord.coordinator.transactions.TransactionCoordinatorShard`, replayed at load.
What only transactions add to the generic runtime:

- **markers after durability.** Every result of a shard (a request's, a timer's, a load's) goes
  through :func:`_with_markers`, which adds one more "response" to it: the result's markers,
  delivered to the :class:`~kcoord.runtime.marker_dispatcher.MarkerDispatcher` by the runner
  exactly when it releases the responses, i.e. once the decision's record is durable (and never
  when the append fails). When a transaction's markers are all written the dispatcher calls
  back and the shard writes CompleteCommit/CompleteAbort (``markers_written``). At load the
  shard returns the markers of every decision left incomplete, so they are completed then.
- **no client backoff on the happy path.** librdkafka starts its next transaction at once, so
  its AddPartitionsToTxn often arrives while the previous decision's markers (or its
  CompleteCommit) are still being written, which Kafka answers CONCURRENT_TRANSACTIONS and the
  client retries after a 20 ms backoff. Here such a request waits (up to
  ``_COMPLETION_WAIT_S``) for that completion to be durable and is then run once more: the
  answer is what the shard says after the completion (the same checks as Kafka's), only sooner.
- **timers**: the shard arms its two scans at load (abort timed-out transactions, remove ids
  idle past ``transactional.id.expiration.ms``); each counts in :class:`TransactionObserver`.
- **Produce verification** (KIP-890 part 1): :meth:`TransactionCoordinator.verify`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any, Protocol

from kcoord.coordinator.transactions import (
    TRANSACTION_KEY_TYPE,
    TRANSACTION_STATE_TOPIC,
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribedTransaction,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListedTransactions,
    ListTransactionsRequest,
    MarkerWriter,
    ProducerIdAllocator,
    TopicPartition,
    TransactionConfig,
    TransactionCoordinatorShard,
    TransactionRecordSerde,
    TransactionResult,
    TransactionState,
    partition_for,
)
from kcoord.coordinator.transactions.shard import ABORT_TIMED_OUT_KEY
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.coordinator_type import CoordinatorType
from kcoord.runtime.marker_dispatcher import MarkerDispatcher, TransactionKey
from kcoord.runtime.runner import PartitionState
from kcoord.runtime.service import CoordinatorService
from kcoord.storage.api import PartitionLog
from kcoord.timer.api import Clock, Timer

__all__ = [
    "TRANSACTION_COORDINATOR",
    "TransactionCoordinator",
    "TransactionObserver",
    "TransactionStateTopic",
    "TransactionStats",
]

TRANSACTION_COORDINATOR = CoordinatorType(
    name="transaction",
    topic=TRANSACTION_STATE_TOPIC,
    key_type=TRANSACTION_KEY_TYPE,
    partition_for=partition_for,
    serde=TransactionRecordSerde(),
)

_UNAVAILABLE_TO_PRODUCE = frozenset(
    {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress}
)
"""The coordinator cannot verify now: Kafka answers the Produce NOT_ENOUGH_REPLICAS (retriable)."""

_COMPLETION_WAIT_S = 0.5
"""How long an AddPartitionsToTxn/AddOffsetsToTxn answered CONCURRENT_TRANSACTIONS waits for the
previous decision of its id to complete before that answer is sent (the client then retries)."""


class TransactionStateTopic(Protocol):
    """What the transaction coordinator needs of the topic catalogue."""

    async def ensure_internal_topic(self, name: str, partitions: int) -> int:
        """Create internal topic ``name`` if missing; return its real partition count."""

    def partition_log(self, name: str, partition: int) -> PartitionLog | None: ...


class TransactionObserver(Protocol):
    """What the coordinator reports for metrics (the Prometheus side lives in observability/)."""

    def transaction_completed(self, committed: bool) -> None: ...

    def transactions_timed_out(self, count: int) -> None: ...


class _NoObserver:
    def transaction_completed(self, committed: bool) -> None:
        pass

    def transactions_timed_out(self, count: int) -> None:
        pass


class TransactionStats:
    """Open transactions on this node and the age of the oldest (for the metrics' collector)."""

    def __init__(self, open_transactions: int, oldest_age_ms: int) -> None:
        self.open_transactions = open_transactions
        self.oldest_age_ms = oldest_age_ms


class _StateTopicOf:
    def __init__(self, topics: TransactionStateTopic) -> None:
        self._topics = topics

    async def ensure_topic(self, partitions: int) -> int:
        return await self._topics.ensure_internal_topic(TRANSACTION_STATE_TOPIC, partitions)

    def partition_log(self, partition: int) -> PartitionLog | None:
        return self._topics.partition_log(TRANSACTION_STATE_TOPIC, partition)


class _MarkerRelease:
    """A result's markers, handed to the dispatcher when the runner releases the result's responses."""

    __slots__ = ("_dispatch",)

    def __init__(self, dispatch: Callable[[Any], None]) -> None:
        self._dispatch = dispatch

    def deliver(self, markers: Any) -> None:
        self._dispatch(markers)

    def fail(self, error: BaseException) -> None:
        """The decision did not become durable: no marker may be written."""


class _CompletionSink:
    """Settles a decision's completion future once its CompleteCommit/CompleteAbort is durable
    (or failed: the waiter then runs its request again and gets the shard's answer)."""

    __slots__ = ("_settle",)

    def __init__(self, settle: Callable[[], None]) -> None:
        self._settle = settle

    def deliver(self, _: Any) -> None:
        self._settle()

    def fail(self, error: BaseException) -> None:
        self._settle()


class _Shard(TransactionCoordinatorShard):
    """The core shard, with its own results (load, timers) carrying their markers to the dispatcher."""

    def __init__(
        self,
        release: _MarkerRelease,
        observer: TransactionObserver,
        allocator: ProducerIdAllocator,
        config: TransactionConfig,
        timer: Timer,
    ) -> None:
        super().__init__(allocator, config, timer)
        self._release = release
        self._observer = observer

    def on_loaded(self, now_ms: int) -> TransactionResult:
        return _with_markers(super().on_loaded(now_ms), self._release)

    def on_timer(self, key: str, now_ms: int) -> TransactionResult:
        result = super().on_timer(key, now_ms)
        if key == ABORT_TIMED_OUT_KEY and result.records:
            self._observer.transactions_timed_out(len(result.records))
        return _with_markers(result, self._release)


def _with_markers(result: TransactionResult, release: _MarkerRelease) -> TransactionResult:
    if result.markers:
        result.respond(release, list(result.markers))
    return result


class TransactionCoordinator(CoordinatorService):
    """The transaction coordinator: the generic service over ``__transaction_state``, plus markers."""

    def __init__(
        self,
        topics: TransactionStateTopic,
        clock: Clock,
        allocator: ProducerIdAllocator,
        config: TransactionConfig,
        *,
        marker_writer: MarkerWriter | None = None,
        transaction_observer: TransactionObserver | None = None,
        coordinator_epoch: Callable[[str, int], int] | None = None,
        **options: Any,
    ) -> None:
        """``coordinator_epoch``: ``(topic, partition) -> epoch`` this node coordinates a
        ``__transaction_state`` partition under (in a cluster its leader epoch, as Kafka's), which
        its markers carry so a data partition refuses those of an older coordinator; 0 without.
        ``options``: :class:`CoordinatorService`'s (``num_partitions``, ``append_timeout_ms``,
        ``observer``, ``owned_only``, ``serving``)."""
        self.config = config
        self._allocator = allocator
        epoch_of = coordinator_epoch or (lambda topic, partition: 0)
        self._txn_observer: TransactionObserver = transaction_observer or _NoObserver()
        self.markers = MarkerDispatcher(
            marker_writer,
            self._markers_written,
            still_coordinating=lambda transactional_id: self.loaded_runner(transactional_id) is not None,
            coordinator_epoch=lambda transactional_id: epoch_of(*self.placement(transactional_id)),
        )
        self._release = _MarkerRelease(self.markers.dispatch)
        self._completions: dict[str, asyncio.Future[None]] = {}
        """Per transactional id: its decision's CompleteCommit/CompleteAbort, submitted, not yet durable."""
        super().__init__(
            TRANSACTION_COORDINATOR, _StateTopicOf(topics), clock, self._new_txn_shard, **options
        )

    def _new_txn_shard(self, partition: int, timer: Timer) -> _Shard:
        return _Shard(self._release, self._txn_observer, self._allocator, self.config, timer)

    async def stop(self) -> None:
        await self.markers.stop()
        await super().stop()

    # -- the client's requests (each on its id's partition; answered once durable)

    async def init_producer_id(self, request: InitProducerIdRequest) -> InitProducerIdResponse:
        response: InitProducerIdResponse = await self._write(
            request.transactional_id, "init_producer_id", request
        )
        return response

    async def add_partitions(self, request: AddPartitionsToTxnRequest) -> ErrorCode:
        return await self._add_after_completion(request.transactional_id, "add_partitions", request)

    async def add_offsets(self, request: AddOffsetsToTxnRequest) -> ErrorCode:
        return await self._add_after_completion(request.transactional_id, "add_offsets", request)

    async def _add_after_completion(self, transactional_id: str, handler: str, request: Any) -> ErrorCode:
        """Run the add; one answered CONCURRENT_TRANSACTIONS while the id's previous decision is being
        completed here runs again once that completion is durable (see the module docstring)."""
        error: ErrorCode = await self._write(transactional_id, handler, request)
        if error is not ErrorCode.concurrent_transactions:
            return error
        if not await self._completed(transactional_id):
            return error
        retried: ErrorCode = await self._write(transactional_id, handler, request)
        return retried

    async def _completed(self, transactional_id: str) -> bool:
        """Wait (bounded) for the id's markers and then its completion record; False when there was
        nothing being completed or it did not finish in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _COMPLETION_WAIT_S
        writing = self.markers.writing(transactional_id)
        completion = self._completions.get(transactional_id)
        if not writing and completion is None:
            return False
        with contextlib.suppress(TimeoutError):
            if writing:
                await asyncio.wait_for(asyncio.wait(writing), deadline - loop.time())
            completion = self._completions.get(transactional_id)
            if completion is not None:
                await asyncio.wait_for(asyncio.shield(completion), deadline - loop.time())
            return True
        return False

    async def end_txn(self, request: EndTxnRequest) -> EndTxnResponse:
        response: EndTxnResponse = await self._write(request.transactional_id, "end_txn", request)
        return response

    async def _write(self, transactional_id: str, handler: str, request: Any) -> Any:
        if not transactional_id:
            raise KafkaError(ErrorCode.invalid_request, "empty transactional id")
        return await self.write(transactional_id, functools.partial(_run, handler, request, self._release))

    def _markers_written(self, key: TransactionKey) -> None:
        """Every marker of the decision is written: the shard completes it (if it still holds it)."""
        runner = self.loaded_runner(key.transactional_id)
        if runner is None:
            return
        shard: Any = runner.shard
        completion = asyncio.get_running_loop().create_future()
        settle = functools.partial(self._settle, key.transactional_id, completion)
        self._completions[key.transactional_id] = completion

        def complete(now_ms: int) -> TransactionResult:
            result: TransactionResult = shard.markers_written(
                key.transactional_id, key.producer_id, key.producer_epoch, now_ms
            )
            if result.records:
                self._txn_observer.transaction_completed(key.committed)
            result.respond(_CompletionSink(settle), None)
            return result

        try:
            runner.run_scheduled(
                complete, "transaction.complete_failed", transactional_id=key.transactional_id
            )
        finally:
            if not completion.done() and runner.state is not PartitionState.ACTIVE:
                settle()

    def _settle(self, transactional_id: str, completion: asyncio.Future[None]) -> None:
        if not completion.done():
            completion.set_result(None)
        if self._completions.get(transactional_id) is completion:
            del self._completions[transactional_id]

    # -- operators and the Produce check

    def describe(self, transactional_id: str) -> DescribedTransaction:
        """One id's transaction; raises NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when not here."""
        described: list[DescribedTransaction] = self.read(
            transactional_id, lambda shard: shard.describe([transactional_id])
        )
        return described[0]

    def list_transactions(self, request: ListTransactionsRequest) -> tuple[ErrorCode, ListedTransactions]:
        """Every loaded partition's transactions; COORDINATOR_LOAD_IN_PROGRESS while some still load."""
        now_ms = self._clock.now_ms()
        found: list[tuple[str, int, str]] = []
        unknown: tuple[str, ...] = ()
        for shard in self.active_shards():
            listed: ListedTransactions = shard.list_transactions(request, now_ms)
            found.extend(listed.transactions)
            unknown = listed.unknown_state_filters
        loading = any(runner.state is not PartitionState.ACTIVE for runner in self.all_runners())
        error = ErrorCode.coordinator_load_in_progress if loading else ErrorCode.none
        return error, ListedTransactions(tuple(sorted(found)), unknown)

    def stats(self) -> TransactionStats:
        """Open transactions (Ongoing or being completed) on this node and the oldest one's age."""
        now_ms = self._clock.now_ms()
        starts = [
            metadata.start_ms
            for shard in self.active_shards()
            for metadata in shard.transactions.values()
            if metadata.state in _OPEN
        ]
        return TransactionStats(len(starts), max((now_ms - start for start in starts), default=0))

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        """Contract C: may this transactional Produce be appended to ``topic``-``partition``?

        NONE when the partition is in the producer's Ongoing transaction; INVALID_TXN_STATE when it
        was not added (what Kafka answers clients of transaction version 1); the producer's error
        (PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS) otherwise. While
        the id's coordinator partition is loading, NOT_ENOUGH_REPLICAS, which the producer retries
        (Kafka's mapping). In a cluster, when another node is the id's coordinator, the batch is
        not verified (NONE): Kafka would ask that node (AddPartitionsToTxn v4, verify only), which
        kcoord does not do yet."""
        wanted = TopicPartition(topic, partition)
        if self._owned_only and self._runners.get(self.partition_for(transactional_id)) is None:
            return ErrorCode.none  # the id's coordinator is another node: not verified (see above)
        try:
            errors: dict[TopicPartition, ErrorCode] = self.read(
                transactional_id,
                lambda shard: shard.verify_partitions(
                    transactional_id, producer_id, producer_epoch, [wanted]
                ),
            )
        except KafkaError as exc:
            return ErrorCode.not_enough_replicas if exc.code in _UNAVAILABLE_TO_PRODUCE else exc.code
        error = errors.get(wanted, ErrorCode.invalid_txn_state)
        return ErrorCode.invalid_txn_state if error is ErrorCode.transaction_abortable else error


_OPEN = frozenset({TransactionState.ONGOING, TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})


def _run(handler: str, request: Any, release: _MarkerRelease, shard: Any, sink: Any, now_ms: int) -> Any:
    result: TransactionResult = getattr(shard, handler)(request, sink, now_ms)
    return _with_markers(result, release)
