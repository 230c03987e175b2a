"""The group coordinator service: routes a group to its offsets-log partition and runs it there.

A group lives on partition ``partition_for(group_id)`` of ``__consumer_offsets``. This service
creates that topic at start, starts one :class:`PartitionRunner` per partition (each loads its
partition from the log concurrently), drives the shared timing wheel, and runs the periodic
offset expiry. Edge modules call :meth:`write` (an operation that may append records and whose
response is released after they are durable) or :meth:`read` (a synchronous look at the state).

In a cluster (``owned_only``) the service starts with no partition: the node's membership hands
it the partitions this node owns (:meth:`acquire`, which loads the group state another node left
in the shared log, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile) and takes them back
(:meth:`release`). A group on a partition it does not hold, or any group while ``serving`` says the
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

from kcoord.coordinator.classic.messages import HeartbeatRequest
from kcoord.coordinator.partitioner import partition_for
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import KafkaError
from kcoord.runtime.observer import NO_OBSERVER, RuntimeObserver
from kcoord.runtime.runner import (
    DEFAULT_APPEND_TIMEOUT_MS,
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

OFFSETS_TOPIC = "__consumer_offsets"
_LOAD_PROGRESS_EVERY_S = 2.0

T = TypeVar("T")

Operation = Callable[[Any, Any, int], CoordinatorResult]
"""``op(shard, sink, now_ms) -> result``: runs on the group's partition."""


class OffsetsTopic(Protocol):
    """What the service needs of the topic catalogue."""

    async def ensure_offsets_topic(self, partitions: int) -> int:
        """Create ``__consumer_offsets`` if missing; return its real partition count."""

    def partition_log(self, name: str, partition: int) -> PartitionLog | None: ...


class GroupCoordinator:
    def __init__(
        self,
        topics: OffsetsTopic,
        clock: Clock,
        shard_factory: Callable[[int, Timer], Shard],
        *,
        num_partitions: int,
        expiry_interval_ms: int,
        append_timeout_ms: int = DEFAULT_APPEND_TIMEOUT_MS,
        observer: RuntimeObserver = NO_OBSERVER,
        owned_only: bool = False,
        serving: Callable[[], bool] = lambda: True,
    ) -> None:
        self._topics = topics
        self._owned_only = owned_only
        self._serving = serving
        self._clock = clock
        self._shard_factory = shard_factory
        self.num_partitions = num_partitions
        self._expiry_interval_ms = expiry_interval_ms
        self._append_timeout_ms = append_timeout_ms
        self._observer = observer
        self._runners: dict[int, PartitionRunner] = {}
        self._driver = TimerDriver(TimingWheel(start_ms=clock.now_ms()), clock, self._on_expired)
        self._tasks: set[asyncio.Task[None]] = set()
        self.loaded = asyncio.Event()

    async def start(self) -> None:
        """Create the offsets topic if needed and start loading every partition."""
        self.num_partitions = await self._topics.ensure_offsets_topic(self.num_partitions)
        for partition in range(0 if self._owned_only else self.num_partitions):
            partition_log = self._topics.partition_log(OFFSETS_TOPIC, partition)
            if partition_log is None:
                raise RuntimeError(f"{OFFSETS_TOPIC}-{partition} has no log")
            self._runners[partition] = self._new_runner(partition, partition_log)
        self._driver.start()
        self._spawn(self._load_all())
        self._spawn(self._expire_periodically())

    def _new_runner(self, partition: int, partition_log: PartitionLog) -> PartitionRunner:
        new_shard = functools.partial(self._new_shard, partition)
        return PartitionRunner(
            partition,
            new_shard(),
            partition_log,
            self._clock,
            shard_factory=new_shard,
            observer=self._observer,
            append_timeout_ms=self._append_timeout_ms,
        )

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None:
        """This node owns ``partition`` now (its log fresh from the shared store): load its groups."""
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
            "offsets_partitions.loaded",
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
                "offsets_partitions.loading",
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

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def runner(self, group_id: str) -> PartitionRunner:
        runner = self._runners.get(self.partition_for(group_id))
        if runner is None or not self._serving():
            raise KafkaError(ErrorCode.not_coordinator)
        return runner

    async def write(self, group_id: str, operation: Operation) -> Any:
        """Run ``operation`` on the group's shard; returns the response once it is released."""
        runner = self.runner(group_id)
        sink = Sink()
        runner.run(lambda now: operation(runner.shard, sink, now))
        runner.watch(sink)
        try:
            return await sink
        finally:
            runner.unwatch(sink)

    def heartbeat(self, request: HeartbeatRequest, connection_id: int) -> ErrorCode:
        """A heartbeat, answered at once: it never parks and never writes.

        The hot path of every stable group, so it skips what :meth:`write` needs for requests
        that wait or append: no sink, no future, no result object.
        """
        runner = self.runner(request.group_id)
        runner.check_active()
        shard: Any = runner.shard
        error: ErrorCode = shard.heartbeat_code(request, runner.clock.now_ms(), connection_id)
        return error

    def read(self, group_id: str, reader: Callable[[Any], T]) -> T:
        """A synchronous look at the group's shard (raises while it is loading)."""
        runner = self.runner(group_id)
        runner.check_active()
        return reader(runner.shard)

    def member_disconnected(self, group_id: str, member_id: str, connection_id: int) -> None:
        """A connection that carried this member closed (fast-failover hint; see classic/liveness.py)."""
        runner = self._runners.get(self.partition_for(group_id))
        if runner is None:
            return
        shard: Any = runner.shard
        if runner.state is PartitionState.ACTIVE:
            runner.run(lambda now: shard.member_disconnected(group_id, member_id, connection_id, now))

    def partitions_added(self, topic: str) -> None:
        """A topic grew: every shard rebalances the groups subscribed to it."""
        for runner in self._runners.values():
            if runner.state is PartitionState.ACTIVE:
                runner.run(functools.partial(_partitions_added, runner.shard, topic))

    def topic_changed(self, topic: str) -> None:
        """A topic was created or deleted: every shard updates the consumer groups subscribed to it."""
        for runner in self._runners.values():
            if runner.state is PartitionState.ACTIVE:
                runner.run(functools.partial(_topic_changed, runner.shard, topic))

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

    async def _expire_periodically(self) -> None:
        await self.loaded.wait()
        while True:
            await asyncio.sleep(self._expiry_interval_ms / 1000)
            for runner in self._runners.values():
                runner.run_scheduled(
                    functools.partial(_expire_offsets, runner.shard), "coordinator.offset_expiry_failed"
                )

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _partitions_added(shard: Any, topic: str, now_ms: int) -> CoordinatorResult:
    result: CoordinatorResult = shard.on_partitions_added(topic, now_ms)
    return result


def _topic_changed(shard: Any, topic: str, now_ms: int) -> CoordinatorResult:
    result: CoordinatorResult = shard.on_topic_changed(topic, now_ms)
    return result


def _expire_offsets(shard: Any, now_ms: int) -> CoordinatorResult:
    result: CoordinatorResult = shard.expire_offsets(now_ms)
    return result
