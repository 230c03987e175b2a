"""The shell around the pure coordinator shards: loading, appending, releasing, timers.

One :class:`PartitionRunner` per partition of a coordinator's topic (the group coordinator's
offsets log, later the transaction and share state logs). Everything a shard does
runs synchronously on the event loop, so operations on one partition are serial without a lock;
the only waiting is for the log, and the log assigns offsets in call order, so appends (and the
responses they release) stay in operation order. Partitions never wait for each other.

The contract with a shard, after Kafka's ``CoordinatorRuntime``:

- an operation returns a :class:`CoordinatorResult` (records + responses);
- the records are appended as one batch; once durable they are handed to
  ``shard.on_appended`` and only then are the responses released (answer after durability);
- loading a partition replays every record through ``shard.replay`` (with its offset and its
  batch's producer id and epoch; markers through ``replay_end_transaction_marker``), the same path a restart
  or a failover (a cluster node claiming the partition) takes; until it finishes the partition
  answers COORDINATOR_LOAD_IN_PROGRESS;
- timers only enqueue an operation on the partition that owns them;
- an operation of a producer's transaction (:meth:`PartitionRunner.run_transactional`) and a
  transaction's end marker (:meth:`PartitionRunner.write_marker`) each go to the log as a batch of
  their own with the producer's id and epoch, in order with the partition's other appends, and are
  replayed with the producer once durable, as loading replays them.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.control_batch import encode_marker_batch
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.plain_batch import EncodedBatch
from kcoord.runtime.coordinator_type import CoordinatorShard, RecordSerde, TransactionalRecordSerde
from kcoord.runtime.loading import LoadStats, replay_log
from kcoord.runtime.observer import NO_OBSERVER, RuntimeObserver
from kcoord.storage.api import PartitionLog
from kcoord.timer.api import Clock, Timer

log = structlog.get_logger(__name__)

DEFAULT_APPEND_TIMEOUT_MS = 5000
"""``offsets.commit.timeout.ms``'s default."""
_LOAD_RETRY_MIN_S = 0.1
_LOAD_RETRY_MAX_S = 10.0
_WAITING_SWEEP_MIN = 256
"""Watched sinks a runner holds before it first drops the answered ones."""


Shard = CoordinatorShard


class Sink(asyncio.Future[Any]):
    """The waiting client of one request: the future the edge awaits, itself.

    One object per request (not a wrapper around a future): on the commit path every request
    makes one, so the hand-off is the cheapest awaitable asyncio has. Delivering to a sink that
    already has its answer (timed out, failed) is a no-op.
    """

    __slots__ = ()

    def deliver(self, response: Any) -> None:
        if not self.done():
            self.set_result(response)

    def fail(self, error: BaseException) -> None:
        if not self.done():
            self.set_exception(error)


class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    CLOSED = "closed"


class PrefixedTimer:
    """A shard's view of the shared wheel: its keys carry the partition so expiries find their way back."""

    def __init__(self, timer: Timer, partition: int) -> None:
        self._timer = timer
        self._prefix = f"{partition}|"

    def schedule(self, key: str, deadline_ms: int) -> None:
        self._timer.schedule(self._prefix + key, deadline_ms)

    def cancel(self, key: str) -> None:
        self._timer.cancel(self._prefix + key)

    def deadline(self, key: str) -> int | None:
        return self._timer.deadline(self._prefix + key)


def split_timer_key(key: str) -> tuple[int, str]:
    partition, _, inner = key.partition("|")
    return int(partition), inner


class _Pending:
    """The results of one partition that go into one batch, and when they must be answered by."""

    __slots__ = ("deadline", "epoch", "results")

    def __init__(self, deadline: float) -> None:
        self.results: list[CoordinatorResult] = []
        self.deadline = deadline
        """``loop.time()`` by which the batch must be durable (``offsets.commit.timeout.ms``)."""
        self.epoch = 0
        """The runner's epoch when the batch went to the log (a later failure makes it stale)."""


class _ProducerBatch(_Pending):
    """One producer's transactional records, or its end marker: a batch of its own, with its producer."""

    __slots__ = ("marker", "producer_epoch", "producer_id")

    def __init__(self, deadline: float, producer_id: int, producer_epoch: int, marker: bool | None) -> None:
        super().__init__(deadline)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.marker = marker
        """None for transactional records; True (commit) or False (abort) for an end marker."""


class AppendRounds:
    """Starts the appends of every partition with results waiting, once per loop iteration.

    One loop callback for all the partitions of a service that have a batch due (not one per
    partition): at depth 1 each request of a commit round lands on its own partition.
    """

    __slots__ = ("_due", "_scheduled")

    def __init__(self) -> None:
        self._due: list[PartitionRunner] = []
        self._scheduled = False

    def due(self, runner: PartitionRunner) -> None:
        self._due.append(runner)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._append_all)

    def _append_all(self) -> None:
        self._scheduled = False
        due, self._due = self._due, []
        for runner in due:
            try:
                runner.append_pending()
            except Exception as exc:  # its batch is answered by the timeout sweep; the others go on
                runner.append_failed_to_start(exc)


class PartitionRunner:
    """Runs one coordinator partition's shard: loads it, appends its results, answers after durability.

    Results of operations that run in the same loop iteration go to the log as one batch (one
    append, one task); the log's group commit then writes the batches of every partition together.
    A batch that is not on disk within ``append_timeout_ms`` answers REQUEST_TIMED_OUT (its records
    still count once they land): one timer per partition, armed only while batches are unanswered,
    sweeps them in submission order (not one timer per batch: the commit path pays for every
    handle). A batch that fails answers NOT_COORDINATOR (Kafka's answer to a storage error),
    fails every batch of the partition still in flight, and reloads the partition from its log,
    so the shard holds exactly what the log does. A load that fails leaves the partition FAILED
    (COORDINATOR_NOT_AVAILABLE) and is retried with a growing backoff.
    """

    def __init__(
        self,
        partition: int,
        shard: Shard,
        partition_log: PartitionLog,
        clock: Clock,
        *,
        serde: RecordSerde,
        shard_factory: Callable[[], Shard] | None = None,
        observer: RuntimeObserver = NO_OBSERVER,
        append_timeout_ms: int = DEFAULT_APPEND_TIMEOUT_MS,
        rounds: AppendRounds | None = None,
    ) -> None:
        self.partition = partition
        self.shard = shard
        self.log = partition_log
        self.clock = clock
        self.serde = serde
        self.state = PartitionState.LOADING
        self.load_stats = LoadStats()
        self.load_attempts = 0
        self._shard_factory = shard_factory
        self._observer = observer
        self._append_timeout_s = append_timeout_ms / 1000
        self._rounds = rounds if rounds is not None else AppendRounds()
        """Shared by the runners of one service: one loop callback starts all their appends."""
        self._pending: _Pending | None = None
        self._unanswered: dict[_Pending, None] = {}
        """Batches submitted and not yet answered, oldest first (so also by deadline)."""
        self._sweeper: asyncio.TimerHandle | None = None
        self._epoch = 0
        """Bumped by a failed append: batches in flight from before it are not applied."""
        self._in_flight: dict[asyncio.Future[Any], _Pending] = {}
        """Appends under way and the batch each carries (one bound callback, not a closure per append)."""
        self._waiting: set[Sink] = set()
        """Sinks of operations not answered yet (parked or appending): a failed timer answers them.
        May also hold answered ones until :meth:`watch` sweeps them."""
        self._sweep_waiting_at = _WAITING_SWEEP_MIN
        self._reloading: asyncio.Task[None] | None = None
        self._log = log.bind(partition=partition)

    def check_active(self) -> None:
        state = self.state
        if state is PartitionState.ACTIVE:
            return
        if state is PartitionState.LOADING:
            raise KafkaError(ErrorCode.coordinator_load_in_progress)
        if state is PartitionState.FAILED:
            raise KafkaError(ErrorCode.coordinator_not_available)
        raise KafkaError(ErrorCode.not_coordinator)

    def run(self, operation: Callable[[int], CoordinatorResult]) -> None:
        """Run one operation now and hand its result on (append, then release)."""
        self.check_active()
        self.submit(operation(self.clock.now_ms()))

    def run_with(self, operation: Callable[[Any, Sink, int], CoordinatorResult], sink: Sink) -> bool:
        """Run ``operation(shard, sink, now_ms)`` now and hand its result on (:meth:`run`, no closure).

        True when ``sink`` is answered by the append of the result's records (its first response):
        the batch answers it whatever happens (durable, failed, timed out), so it needs no
        :meth:`watch`."""
        if self.state is not PartitionState.ACTIVE:
            self.check_active()
        return self._queue(operation(self.shard, sink, self.clock.now_ms()), sink)

    def run_request(
        self, operation: Callable[[Any, Any, Sink, int], CoordinatorResult], request: Any, sink: Sink
    ) -> bool:
        """:meth:`run_with` for ``operation(shard, request, sink, now_ms)``: an unbound shard method
        serves, where :meth:`run_with` needs a closure over the request (made per request)."""
        if self.state is not PartitionState.ACTIVE:
            self.check_active()
        return self._queue(operation(self.shard, request, sink, self.clock.now_ms()), sink)

    def _queue(self, result: CoordinatorResult, sink: Sink) -> bool:
        """:meth:`submit`, and whether ``sink`` is the first response of the records' batch."""
        if not result.records:
            _release(result)
            return False
        pending = self._pending
        if pending is None:
            pending = self._new_pending()
        pending.results.append(result)
        responses = result.responses
        return bool(responses) and responses[0][0] is sink

    def run_transactional(
        self,
        operation: Callable[[Any, Sink, int], CoordinatorResult],
        sink: Sink,
        producer_id: int,
        producer_epoch: int,
    ) -> None:
        """:meth:`run_with` for an operation of a producer's transaction (TxnOffsetCommit).

        Its records go to the log as one transactional batch of the producer, after whatever this
        partition has waiting; once durable each is replayed with the producer
        (``shard.replay(record, -1, producer_id, producer_epoch)``: pending until its marker), then
        the responses are released. The operation's records must be ones whose state changes on
        replay only. The plain path (:meth:`run_with`) is untouched by this.
        """
        if self.state is not PartitionState.ACTIVE:
            self.check_active()
        serde = self.serde
        if not isinstance(serde, TransactionalRecordSerde):
            raise KafkaError(
                ErrorCode.unknown_server_error, "this coordinator writes no transactional records"
            )
        now_ms = self.clock.now_ms()
        result = operation(self.shard, sink, now_ms)
        if not result.records:
            _release(result)
            return
        try:
            batch = serde.encode_transactional_batch(result.records, producer_id, producer_epoch, now_ms)
        except Exception as exc:
            self._log.error("offsets_log.record_encoding_failed", error=repr(exc), exc_info=exc)
            _fail([result], KafkaError(ErrorCode.unknown_server_error))
            self._epoch += 1
            self._start_reload()
            return
        self._append_own(_ProducerBatch(self._deadline(), producer_id, producer_epoch, None), result, batch)

    def write_marker(
        self, sink: Sink, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int
    ) -> None:
        """Append the producer's end marker (a control batch) after whatever this partition has waiting;
        once durable it goes to ``shard.replay_end_transaction_marker`` and ``sink`` gets NONE."""
        self.check_active()
        batch = encode_marker_batch(
            producer_id, producer_epoch, committed, coordinator_epoch, self.clock.now_ms()
        )
        answer = CoordinatorResult(responses=[(sink, ErrorCode.none)])
        self._append_own(
            _ProducerBatch(self._deadline(), producer_id, producer_epoch, committed), answer, batch
        )

    def _deadline(self) -> float:
        return asyncio.get_running_loop().time() + self._append_timeout_s

    def _append_own(self, pending: _ProducerBatch, result: CoordinatorResult, batch: EncodedBatch) -> None:
        """Append one producer batch on its own, in order after the partition's waiting results.

        An append that cannot start answers NOT_COORDINATOR (logged), as a failed append does."""
        try:
            self.append_pending()
        except Exception as exc:  # that batch is answered by the timeout sweep, as in AppendRounds
            self.append_failed_to_start(exc)
        pending.results.append(result)
        pending.epoch = self._epoch
        try:
            append: asyncio.Future[Any] | None = self.log.append_soon(batch, self._producer_batch_appended)
            if append is None:
                append = asyncio.ensure_future(self.log.append(batch.data))
                append.add_done_callback(self._producer_batch_appended)
        except Exception as exc:
            self.append_failed_to_start(exc)
            _fail(pending.results, KafkaError(ErrorCode.not_coordinator))
            return
        self._in_flight[append] = pending
        self._unanswered[pending] = None
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_at(pending.deadline, self._sweep)

    def _producer_batch_appended(self, append: asyncio.Future[Any]) -> None:
        pending = self._in_flight.pop(append)
        assert isinstance(pending, _ProducerBatch)
        epoch = pending.epoch
        self._unanswered.pop(pending, None)
        error = append.exception() if not append.cancelled() else asyncio.CancelledError()
        if error is not None or epoch != self._epoch:
            self._append_failed(pending, error, epoch)
            return
        if pending.marker is None:
            for result in pending.results:
                for record in result.records:
                    self.shard.replay(record, -1, pending.producer_id, pending.producer_epoch)
        else:
            self.shard.replay_end_transaction_marker(
                pending.producer_id, pending.producer_epoch, pending.marker
            )
        for result in pending.results:
            _release(result)

    def writes_waiting(self) -> bool:
        """Whether a batch of this partition is collecting results or on its way to the log."""
        return self._pending is not None or bool(self._in_flight)

    def after_writes(self, sink: Sink) -> None:
        """Have ``sink`` answered (None) once every batch submitted so far is durable, or failed as they
        fail (when none is waiting, at once).

        Batches are answered in log order, so riding on the newest one is enough. This is how a
        read that must see every write before it (OffsetFetch's ``require_stable``, which Kafka
        serves as a write) waits, without a batch of its own."""
        newest = self._pending
        if newest is None and self._in_flight:
            newest = next(reversed(self._in_flight.values()))
        if newest is None:
            sink.deliver(None)
            return
        newest.results.append(CoordinatorResult(responses=[(sink, None)]))

    def watch(self, sink: Sink) -> None:
        """Remember ``sink`` while its caller awaits it, so a failure of the partition can still answer it.

        The caller may call :meth:`unwatch` once the await ends (answered or cancelled); sinks that
        are done are otherwise dropped here, whenever the set has doubled since the last sweep (a
        few checks per request, amortised). Either is cheaper on the commit path than a
        done-callback, which costs a scheduled loop callback per request.
        """
        waiting = self._waiting
        waiting.add(sink)
        if len(waiting) > self._sweep_waiting_at:
            self._waiting = waiting = {waiting_sink for waiting_sink in waiting if not waiting_sink.done()}
            self._sweep_waiting_at = max(_WAITING_SWEEP_MIN, 2 * len(waiting))

    def unwatch(self, sink: Sink) -> None:
        self._waiting.discard(sink)

    def run_scheduled(
        self, operation: Callable[[int], CoordinatorResult], event: str, **context: Any
    ) -> None:
        """Run an operation the coordinator starts itself (a timer, offset expiry) on an active partition.

        One that raises may have left the shard half-changed, with requests parked on it that only
        it would have answered (JoinGroups waiting for a join deadline that never completes). As
        after a failed append, the partition is reloaded from its log; every request still waiting
        on it is answered NOT_COORDINATOR, which clients retry after finding the coordinator again,
        and the failure is logged as ``event``.
        """
        if self.state is not PartitionState.ACTIVE:
            return
        try:
            result = operation(self.clock.now_ms())
        except Exception as exc:
            self._log.error(event, error=repr(exc), exc_info=exc, **context)
            self._abandon_shard()
            return
        self.submit(result)

    def _abandon_shard(self) -> None:
        """Drop the shard's state (nothing it has not yet appended is written), answer every waiting
        request NOT_COORDINATOR, and reload the partition from its log."""
        failure = KafkaError(ErrorCode.not_coordinator)
        pending, self._pending = self._pending, None
        if pending is not None:
            self._unanswered.pop(pending, None)
            _fail(pending.results, failure)
        self._epoch += 1
        self._start_reload()
        for sink in list(self._waiting):
            sink.fail(failure)

    def submit(self, result: CoordinatorResult) -> None:
        if not result.records:
            _release(result)
            return
        pending = self._pending
        if pending is None:
            pending = self._new_pending()
        pending.results.append(result)

    def _new_pending(self) -> _Pending:
        """The batch that collects this loop iteration's results, due in the service's next append round."""
        loop = asyncio.get_running_loop()
        pending = self._pending = _Pending(loop.time() + self._append_timeout_s)
        self._rounds.due(self)
        self._unanswered[pending] = None
        if self._sweeper is None:
            self._sweeper = loop.call_at(pending.deadline, self._sweep)
        return pending

    def _sweep(self) -> None:
        """Answer REQUEST_TIMED_OUT for every batch past its deadline; re-arm for the oldest one left."""
        self._sweeper = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for pending in list(self._unanswered):
            if pending.deadline > now:
                self._sweeper = loop.call_at(pending.deadline, self._sweep)
                return
            del self._unanswered[pending]
            _time_out(pending.results)

    def append_pending(self) -> None:
        """Encode the results waiting for this partition as one batch and hand it to the log."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        results = pending.results
        if len(results) == 1:  # one operation in this batch (a partition's usual share of a round)
            records = results[0].records
        else:
            records = [record for result in results for record in result.records]
        try:
            batch = self.serde.encode_batch(records, self.clock.now_ms())
        except Exception as exc:
            self._encoding_failed(pending, exc)
            return
        pending.epoch = self._epoch
        append: asyncio.Future[Any] | None = self.log.append_soon(batch, self._appended)
        if append is None:  # the log is held back or recovering: the awaited path waits for it
            append = asyncio.ensure_future(self.log.append(batch.data))
            append.add_done_callback(self._appended)
        self._in_flight[append] = pending

    def append_failed_to_start(self, error: Exception) -> None:
        """:meth:`append_pending` raised: logged; its results are answered by the timeout sweep."""
        self._log.error("offsets_log.append_not_started", error=repr(error), exc_info=error)

    def _encoding_failed(self, pending: _Pending, error: Exception) -> None:
        """Records that cannot be written: answer UNKNOWN_SERVER_ERROR and drop what the shard assumed."""
        self._unanswered.pop(pending, None)
        self._log.error("offsets_log.record_encoding_failed", error=repr(error), exc_info=error)
        _fail(pending.results, KafkaError(ErrorCode.unknown_server_error))
        self._epoch += 1
        self._start_reload()

    def _appended(self, append: asyncio.Future[Any]) -> None:
        pending = self._in_flight.pop(append)
        epoch = pending.epoch
        self._unanswered.pop(pending, None)  # the sweep may have answered it (timed out)
        error = append.exception() if not append.cancelled() else asyncio.CancelledError()
        if error is None and epoch == self._epoch:
            on_appended = self.shard.on_appended
            for result in pending.results:
                on_appended(result.records)
                for sink, response in result.responses:  # _release, inline
                    if isinstance(response, BaseException):
                        sink.fail(response)
                    else:
                        sink.deliver(response)
            return
        self._append_failed(pending, error, epoch)

    def _append_failed(self, pending: _Pending, error: BaseException | None, epoch: int) -> None:
        """A batch failed, or an earlier one did (stale epoch): NOT_COORDINATOR, and a reload if first."""
        _fail(pending.results, KafkaError(ErrorCode.not_coordinator))
        if error is None or epoch != self._epoch:
            return  # an earlier batch failed: the reload replays whatever of this one is durable
        records = sum(len(result.records) for result in pending.results)
        self._log.error("offsets_log.append_failed", records=records, error=repr(error))
        self._observer.append_failed(self.partition)
        self._epoch += 1
        self._start_reload()

    def _start_reload(self) -> None:
        """Drop the shard's unconfirmed state: a fresh shard replays the log (or the partition fails)."""
        if self.state is not PartitionState.ACTIVE:
            return
        try:
            _release(self.shard.unload())
        except Exception as exc:  # a shard in a broken state: whoever still waits is answered after
            self._log.error("offsets_partition.unload_failed", error=repr(exc), exc_info=exc)
        if self._shard_factory is None:
            self.state = PartitionState.FAILED
            return
        self.state = PartitionState.LOADING
        self._reloading = asyncio.get_running_loop().create_task(self._reload())

    async def _reload(self) -> None:
        if self._in_flight:
            await asyncio.wait(set(self._in_flight))
        if self.state is not PartitionState.LOADING or self._shard_factory is None:
            return
        self.shard = self._shard_factory()
        self.load_stats = LoadStats()
        await self.load()

    async def load(self) -> None:
        """Replay the partition from its log start (yielding to the loop), retrying a failure with backoff."""
        delay = _LOAD_RETRY_MIN_S
        while self.state is not PartitionState.CLOSED:
            self.load_attempts += 1
            try:
                await replay_log(self.log, self.shard, self.serde, self.load_stats, self._log)
            except Exception as exc:
                self._load_failed(exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _LOAD_RETRY_MAX_S)
                if self._closed() or self._shard_factory is None:
                    return
                self.shard = self._shard_factory()
                self.load_stats = LoadStats()
                self.state = PartitionState.LOADING
                continue
            if self._closed():
                return
            self.state = PartitionState.ACTIVE
            self._observer.partition_loaded(self.partition, self.load_stats.records, self.load_stats.seconds)
            self.submit(self.shard.on_loaded(self.clock.now_ms()))
            return

    def _closed(self) -> bool:
        """Whether :meth:`close` ran (a separate call, so type narrowing does not outlive an await)."""
        return self.state is PartitionState.CLOSED

    def _load_failed(self, error: Exception, delay_s: float) -> None:
        self.state = PartitionState.FAILED
        self._observer.load_failed(self.partition)
        self._log.error(
            "offsets_partition.load_failed",
            attempt=self.load_attempts,
            retry_in_ms=round(delay_s * 1000) if self._shard_factory is not None else None,
            error=repr(error),
            exc_info=error,
        )

    async def close(self) -> None:
        """Fail parked requests, wait for in-flight appends."""
        if self.state is PartitionState.ACTIVE:
            _release(self.shard.unload())
        self.state = PartitionState.CLOSED
        self.append_pending()
        if self._reloading is not None:
            self._reloading.cancel()
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=5)
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None


def _time_out(results: list[CoordinatorResult]) -> None:
    """``offsets.commit.timeout.ms`` passed before the batch was durable: answer REQUEST_TIMED_OUT."""
    _fail(results, KafkaError(ErrorCode.request_timed_out))


def _fail(results: list[CoordinatorResult], error: KafkaError) -> None:
    """Answer every response of ``results`` with ``error`` instead."""
    for result in results:
        for sink, _ in result.responses:
            sink.fail(error)


def _release(result: CoordinatorResult) -> None:
    for sink, response in result.responses:
        if isinstance(response, BaseException):
            sink.fail(response)
        else:
            sink.deliver(response)
