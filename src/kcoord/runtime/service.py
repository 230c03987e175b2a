"""One coordinator's service: routes a key to its topic's partition and runs the operation there.

The service is generic over a :class:`~kcoord.runtime.coordinator_type.CoordinatorType` (topic,
partition function, record serde, FindCoordinator key type) and a shard factory; the group
coordinator (:mod:`kcoord.runtime.group_coordinator`) is its first instance. A key lives on
partition ``kind.partition_for(key, partitions)`` of ``kind.topic``. The service makes sure the
topic exists at start, starts one :class:`PartitionRunner` per partition (each loads its partition
from the log concurrently) and drives the shared timing wheel. Edge modules call :meth:`write` (an
operation that may append records and whose response is released after they are durable) or
:meth:`read` (a synchronous look at the state).

In a cluster (``owned_only``) the service starts with no partition: the node's membership hands
it the partitions this node owns (:meth:`acquire`, which loads the state another node left in the
shared log, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile) and takes them back
(:meth:`release`). A key on a partition it does not hold, or any key while ``serving`` says the
node's lease may have lapsed, gets NOT_COORDINATOR, which sends clients back to FindCoordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import structlog
from kio.schema.errors import ErrorCode

from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import KafkaError
from kcoord.runtime.coordinator_type import CoordinatorType
from kcoord.runtime.observer import NO_OBSERVER, RuntimeObserver
from kcoord.runtime.runner import (
    DEFAULT_APPEND_TIMEOUT_MS,
    AppendRounds,
    PartitionRunner,
    PartitionState,
    PrefixedTimer,
    Shard,
    Sink,
    split_timer_key,
)
from kcoord.runtime.timer_driver import TimerDriver
from kcoord.storage.api import PartitionLog
from kcoord.timer.api import Clock, Timer
from kcoord.timer.wheel import TimingWheel

log = structlog.get_logger(__name__)

_LOAD_PROGRESS_EVERY_S = 2.0

T = TypeVar("T")

Operation = Callable[[Any, Any, int], CoordinatorResult]
"""``op(shard, sink, now_ms) -> result``: runs on the key's partition."""


class CoordinatorTopic(Protocol):
    """What the service needs of the topic catalogue for its coordinator's topic."""

    async def ensure_topic(self, partitions: int) -> int:
        """Create the topic if missing; return its real partition count."""

    def partition_log(self, partition: int) -> PartitionLog | None: ...


class CoordinatorService:
    """One coordinator type's partitions on this node: their runners, timers and ownership."""

    def __init__(
        self,
        kind: CoordinatorType,
        topic: CoordinatorTopic,
        clock: Clock,
        shard_factory: Callable[[int, Timer], Shard],
        *,
        num_partitions: int,
        append_timeout_ms: int = DEFAULT_APPEND_TIMEOUT_MS,
        observer: RuntimeObserver = NO_OBSERVER,
        owned_only: bool = False,
        serving: Callable[[], bool] = lambda: True,
    ) -> None:
        self.kind = kind
        self._partition_of = kind.partition_for
        self._topic = topic
        self._owned_only = owned_only
        self._serving = serving
        self._clock = clock
        self._shard_factory = shard_factory
        self.num_partitions = num_partitions
        self._append_timeout_ms = append_timeout_ms
        self._observer = observer
        self._runners: dict[int, PartitionRunner] = {}
        self._rounds = AppendRounds()
        self._driver = TimerDriver(TimingWheel(start_ms=clock.now_ms()), clock, self._on_expired)
        self._tasks: set[asyncio.Task[None]] = set()
        self.loaded = asyncio.Event()

    async def start(self) -> None:
        """Create the coordinator's topic if needed and start loading every partition."""
        self.num_partitions = await self._topic.ensure_topic(self.num_partitions)
        for partition in range(0 if self._owned_only else self.num_partitions):
            partition_log = self._topic.partition_log(partition)
            if partition_log is None:
                raise RuntimeError(f"{self.kind.topic}-{partition} has no log")
            self._runners[partition] = self._new_runner(partition, partition_log)
        self._driver.start()
        self._spawn(self._load_all())

    def _new_runner(self, partition: int, partition_log: PartitionLog) -> PartitionRunner:
        new_shard = functools.partial(self._new_shard, partition)
        return PartitionRunner(
            partition,
            new_shard(),
            partition_log,
            self._clock,
            serde=self.kind.serde,
            shard_factory=new_shard,
            observer=self._observer,
            append_timeout_ms=self._append_timeout_ms,
            rounds=self._rounds,
        )

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None:
        """This node owns ``partition`` now (its log fresh from the shared store): load its state."""
        previous = self._runners.pop(partition, None)
        if previous is not None:
            await previous.close()
        runner = self._runners[partition] = self._new_runner(partition, partition_log)
        started = time.perf_counter()

        async def load() -> None:
            await runner.load()
            log.info(
                "offsets_partition.acquired",
                partition=partition,
                records=runner.load_stats.records,
                duration_ms=round((time.perf_counter() - started) * 1000, 1),
            )

        self._spawn(load())

    async def release(self, partition: int) -> None:
        """This node no longer owns ``partition``: fail its parked requests and drop its state."""
        runner = self._runners.pop(partition, None)
        if runner is not None:
            await runner.close()
            log.info("offsets_partition.released", partition=partition)

    def owned_partitions(self) -> list[int]:
        return sorted(self._runners)

    def _new_shard(self, partition: int) -> Shard:
        return self._shard_factory(partition, PrefixedTimer(self._driver, partition))

    async def _load_all(self) -> None:
        started = time.perf_counter()
        progress = asyncio.get_running_loop().create_task(self._report_loading())
        try:
            await asyncio.gather(*(runner.load() for runner in self._runners.values()))
        finally:
            progress.cancel()
        self.loaded.set()
        log.info(
            f"{self.kind.partitions_event}.loaded",
            coordinator=self.kind.name,
            partitions=len(self._runners),
            records=sum(runner.load_stats.records for runner in self._runners.values()),
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    async def _report_loading(self) -> None:
        """While the partitions load, log every few seconds how far they are."""
        while True:
            await asyncio.sleep(_LOAD_PROGRESS_EVERY_S)
            runners = self._runners.values()
            log.info(
                f"{self.kind.partitions_event}.loading",
                coordinator=self.kind.name,
                active=sum(runner.state is PartitionState.ACTIVE for runner in runners),
                partitions=len(self._runners),
                records=sum(runner.load_stats.records for runner in runners),
            )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._driver.stop()
        # Together: each close waits (bounded) for its own in-flight appends.
        await asyncio.gather(*(runner.close() for runner in self._runners.values()))

    def partition_for(self, key: str) -> int:
        return self.kind.partition_for(key, self.num_partitions)

    def placement(self, key: str) -> tuple[str, int]:
        """(topic, partition) that holds ``key``: where a cluster looks for its owner."""
        return self.kind.topic, self.kind.partition_for(key, self.num_partitions)

    def runner(self, key: str) -> PartitionRunner:
        runner = self._runners.get(self._partition_of(key, self.num_partitions))
        if runner is None or not self._serving():
            raise KafkaError(ErrorCode.not_coordinator)
        return runner

    def write(self, key: str, operation: Operation) -> Sink:
        """Run ``operation`` on the key's shard; the sink to await gives the response once it is released.

        Not a coroutine: the caller awaits the sink itself (one coroutine frame less on every
        commit). A sink its operation parked is watched (:meth:`PartitionRunner.watch`), so that a
        failure of the partition answers it; one an append answers (a commit's) needs no watching.
        """
        runner = self._runners.get(self._partition_of(key, self.num_partitions))  # runner(), inline
        if runner is None or not self._serving():
            raise KafkaError(ErrorCode.not_coordinator)
        sink = Sink()
        if not runner.run_with(operation, sink) and not sink.done():  # parked: watched
            runner.watch(sink)
        return sink

    def write_request(
        self, key: str, operation: Callable[[Any, Any, Sink, int], CoordinatorResult], request: Any
    ) -> Sink:
        """:meth:`write` of ``operation(shard, request, sink, now_ms)`` (an unbound shard method, so
        that a hot write makes no closure per request)."""
        runner = self._runners.get(self._partition_of(key, self.num_partitions))
        if runner is None or not self._serving():
            raise KafkaError(ErrorCode.not_coordinator)
        sink = Sink()
        if not runner.run_request(operation, request, sink) and not sink.done():
            runner.watch(sink)
        return sink

    async def write_transactional(
        self, key: str, operation: Operation, producer_id: int, producer_epoch: int
    ) -> Any:
        """:meth:`write` for an operation of a producer's transaction: its records are appended as one
        transactional batch of the producer (pending for the shard until the producer's marker)."""
        runner = self.runner(key)
        sink = Sink()
        runner.run_transactional(operation, sink, producer_id, producer_epoch)
        runner.watch(sink)
        try:
            return await sink
        finally:
            runner.unwatch(sink)

    async def write_end_marker(
        self, partition: int, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int
    ) -> ErrorCode:
        """Append a transaction's end marker to ``partition`` and apply it to the shard (contract B).

        Serial with the partition's other operations (after whatever it has waiting); answered once
        the marker is durable and the shard has committed (or dropped) the producer's pending records.
        NOT_COORDINATOR when this node does not hold the partition; COORDINATOR_LOAD_IN_PROGRESS
        while it loads; REQUEST_TIMED_OUT or NOT_COORDINATOR when the append does not complete (the
        transaction coordinator retries: a marker written twice is harmless).
        """
        runner = self._runners.get(partition)
        if runner is None or not self._serving():
            return ErrorCode.not_coordinator
        sink = Sink()
        try:
            runner.write_marker(sink, producer_id, producer_epoch, committed, coordinator_epoch)
            runner.watch(sink)
            try:
                await sink
            finally:
                runner.unwatch(sink)
        except KafkaError as exc:
            return exc.code
        return ErrorCode.none

    async def writes_settled(self, key: str) -> None:
        """Wait until every write already submitted to the key's partition is durable (or failed:
        its error is raised). Returns at once when none is waiting."""
        runner = self.runner(key)
        runner.check_active()
        if not runner.writes_waiting():
            return
        sink = Sink()
        runner.after_writes(sink)
        runner.watch(sink)
        try:
            await sink
        finally:
            runner.unwatch(sink)

    def read(self, key: str, reader: Callable[[Any], T]) -> T:
        """A synchronous look at the key's shard (raises while it is loading)."""
        runner = self.runner(key)
        runner.check_active()
        return reader(runner.shard)

    def loaded_runner(self, key: str) -> PartitionRunner | None:
        """The key's runner when this node holds its partition and it has loaded (else None)."""
        runner = self._runners.get(self.kind.partition_for(key, self.num_partitions))
        return runner if runner is not None and runner.state is PartitionState.ACTIVE else None

    def run_on_active(self, operation: Callable[[Any, int], CoordinatorResult]) -> None:
        """Run ``operation(shard, now_ms)`` on every loaded partition (a change every shard must see)."""
        for runner in self._runners.values():
            if runner.state is PartitionState.ACTIVE:
                runner.run(functools.partial(operation, runner.shard))

    def active_shards(self) -> Iterator[Any]:
        """The loaded shards this node may answer for (none while its cluster lease may have lapsed)."""
        if not self._serving():
            return
        for runner in self._runners.values():
            if runner.state is PartitionState.ACTIVE:
                yield runner.shard

    def all_runners(self) -> list[PartitionRunner]:
        return list(self._runners.values())

    def _on_expired(self, keys: list[str]) -> None:
        for full_key in keys:
            partition, key = split_timer_key(full_key)
            runner = self._runners.get(partition)
            if runner is None:
                continue
            runner.run_scheduled(
                functools.partial(runner.shard.on_timer, key), "coordinator.timer_failed", key=key
            )

    def run_periodically(
        self, interval_ms: int, operation: Callable[[Any, int], CoordinatorResult], event: str
    ) -> None:
        """Once every partition has loaded, run ``operation(shard, now_ms)`` on each every ``interval_ms``
        (a failure is logged as ``event`` and reloads that partition, as a failed timer does)."""

        async def periodically() -> None:
            await self.loaded.wait()
            while True:
                await asyncio.sleep(interval_ms / 1000)
                for runner in self._runners.values():
                    runner.run_scheduled(functools.partial(operation, runner.shard), event)

        self._spawn(periodically())

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
