"""The share coordinator's wiring on the generic runtime: ``__share_group_state`` (key type 2).

Kafka's share coordinator keeps the durable state of every share partition (its start offset and
the delivery state and count of its in-flight records) as ShareSnapshot and ShareUpdate records in
``__share_group_state``; a share partition's state lives on partition
``partition_for("group:topicId:partition")`` of it. The topic is made and loaded on the first
share fetch. kcoord runs it as the runtime's third
coordinator type, with the pure :class:`~kcoord.coordinator.share.state_shard.ShareStateShard` as
its shard and :class:`~kcoord.coordinator.share.state_records.ShareStateSerde` as its serde: one
serial runner per partition, answers released once the records are durable, state rebuilt by
replay at load. Kafka's internal RPCs (Read/WriteShareGroupState) are the typed methods of
:class:`ShareCoordinator`, called in process by the share partitions' leader.

The topic is ``cleanup.policy=delete`` with no retention, as Kafka creates it (updates are deltas
over their snapshot, so compaction would lose them). Instead, as Kafka's share coordinator, every
``share.coordinator.state.topic.prune.interval.ms`` each loaded partition's log start is moved up to
the offset below which its shard needs nothing (:meth:`ShareCoordinator.prune_state_log`: the
oldest of its share partitions' latest snapshots), once every write made so far is durable, and
every ``share.coordinator.cold.partition.snapshot.interval.ms`` share partitions with an old latest
snapshot get a new one, so an idle one does not hold that offset down. Both run as tasks beside the
request path; the log start moves through the storage engine's DeleteRecords (durable, its file
work off the loop).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import structlog

from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partitions import StateWrite
from kcoord.coordinator.share.state_records import (
    SHARE_STATE_TOPIC,
    ShareStateKey,
    ShareStateSerde,
    state_partition_for,
)
from kcoord.coordinator.share.state_shard import ShareStateShard, StoredShareState
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.coordinator_type import CoordinatorType
from kcoord.runtime.runner import PartitionRunner, PartitionState, Shard, Sink
from kcoord.runtime.service import CoordinatorService
from kcoord.storage.api import PartitionLog
from kcoord.timer.api import Clock, Timer

__all__ = ["SHARE_COORDINATOR", "SHARE_KEY_TYPE", "ShareCoordinator", "ShareStateTopicOf"]

log = structlog.get_logger(__name__)

SHARE_KEY_TYPE = 2
PRUNE_INTERVAL_MS = 300_000
"""``share.coordinator.state.topic.prune.interval.ms``'s default (Kafka's, an internal setting)."""
COLD_SNAPSHOT_INTERVAL_MS = 300_000
"""``share.coordinator.cold.partition.snapshot.interval.ms``'s default (Kafka's, an internal setting)."""
STATE_TOPIC_CONFIGS = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}

SHARE_COORDINATOR = CoordinatorType(
    name="share",
    topic=SHARE_STATE_TOPIC,
    key_type=SHARE_KEY_TYPE,
    partition_for=state_partition_for,
    serde=ShareStateSerde(),
)


class TopicCatalogue(Protocol):
    """What the share coordinator needs of the topic catalogue."""

    def partition_log(self, name: str, partition: int) -> PartitionLog | None: ...


class ShareStateTopicOf:
    """``__share_group_state`` as the generic service sees a coordinator's topic: created (internal)
    by ``create`` when missing, else kept with the partition count it has."""

    def __init__(
        self,
        topics: TopicCatalogue,
        existing_partitions: Callable[[], int | None],
        create: Callable[[int, Mapping[str, str]], Any],
    ) -> None:
        self._topics = topics
        self._existing = existing_partitions
        self._create = create

    async def ensure_topic(self, partitions: int) -> int:
        existing = self._existing()
        if existing is not None:
            return existing
        try:
            await self._create(partitions, STATE_TOPIC_CONFIGS)
        except KafkaError as exc:
            if exc.code != ErrorCode.topic_already_exists:
                raise
        return self._existing() or partitions

    def partition_log(self, partition: int) -> PartitionLog | None:
        return self._topics.partition_log(SHARE_STATE_TOPIC, partition)

    def exists(self) -> bool:
        return self._existing() is not None


class ShareCoordinator(CoordinatorService):
    """The share coordinator: the generic service over ``__share_group_state``, with Kafka's state
    RPCs as typed in-process calls."""

    def __init__(
        self,
        topic: ShareStateTopicOf,
        clock: Clock,
        shard_factory: Callable[[int, Timer], Shard],
        *,
        prune_interval_ms: int = PRUNE_INTERVAL_MS,
        cold_snapshot_interval_ms: int = COLD_SNAPSHOT_INTERVAL_MS,
        on_pruned: Callable[[int], None] = lambda offsets: None,
        **options: Any,
    ) -> None:
        """``on_pruned(offsets)`` is told how many offsets each pruning of a partition removed;
        ``options``: :class:`CoordinatorService`'s (``num_partitions``, ``append_timeout_ms``,
        ``observer``, ``owned_only``, ``serving``)."""
        super().__init__(SHARE_COORDINATOR, topic, clock, shard_factory, **options)
        self._state_topic = topic
        self._started: asyncio.Future[None] | None = None
        self._prune_interval_ms = prune_interval_ms
        self._cold_snapshot_interval_ms = cold_snapshot_interval_ms
        self._on_pruned = on_pruned
        self._maintaining = False

    async def ensure_started(self) -> None:
        """Start on first use (as Kafka creates ``__share_group_state`` when share groups are first
        used, so a node that never sees one has no such topic) and wait until every partition loaded.

        In a cluster (``owned_only``) this only makes sure the topic exists: the membership hands
        this node the partitions it owns (:meth:`acquire`) and takes them back (:meth:`release`),
        as it does the group coordinator's log's; a key of a partition owned elsewhere is NOT_COORDINATOR."""
        if self._owned_only:
            self.num_partitions = await self._state_topic.ensure_topic(self.num_partitions)
            self._start_timers()
            self._start_maintenance()
            return
        started = self._started
        failed = started is not None and started.done() and not started.cancelled() and started.exception()
        if started is None or (failed and not self.all_runners()):
            # first use, or a start that failed before any partition existed (the topic was not made)
            started = self._started = asyncio.ensure_future(self._start_and_load())
        await asyncio.shield(started)

    async def _start_and_load(self) -> None:
        await self.start()
        self._start_maintenance()
        await self.loaded.wait()

    def _start_maintenance(self) -> None:
        """Start the pruning and cold-snapshot tasks (once; they end with :meth:`stop`)."""
        if self._maintaining:
            return
        self._maintaining = True
        self._spawn(self._every(self._prune_interval_ms, self.prune_state_log, "share_state.prune_failed"))
        cold = self._every(
            self._cold_snapshot_interval_ms, self.snapshot_cold_partitions, "share_state.cold_snapshot_failed"
        )
        self._spawn(cold)

    async def _every(self, interval_ms: int, step: Callable[[], Awaitable[Any]], event: str) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await step()
            except Exception as exc:  # the next pass tries again
                log.warning(event, error=repr(exc))

    async def prune_state_log(self) -> int:
        """Move each loaded partition's log start up to the offset its shard no longer needs, once
        every write already made to it is durable (a record counted but not yet on disk could
        still be lost). Returns how many offsets went."""
        removed = 0
        for partition, runner in list(self._runners.items()):
            removed += await self._prune(partition, runner)
        return removed

    async def _prune(self, partition: int, runner: PartitionRunner) -> int:
        if runner.state is not PartitionState.ACTIVE or not self._serving():
            return 0
        shard = _state_shard(runner)
        below = shard.redundant_below()
        partition_log = runner.log
        start = partition_log.log_start_offset
        if below <= start:
            return 0
        if not await _writes_settled(runner):
            return 0  # a write failed: the partition reloads from its log, the next pass prunes
        if self._runners.get(partition) is not runner or runner.shard is not shard or not self._serving():
            return 0
        new_start = await partition_log.delete_records_before(min(below, partition_log.log_end_offset))
        log.info(
            "share_state.pruned",
            partition=partition,
            log_start_offset=new_start,
            offsets_removed=new_start - start,
            log_end_offset=partition_log.log_end_offset,
        )
        self._on_pruned(new_start - start)
        return new_start - start

    async def snapshot_cold_partitions(self) -> None:
        """Write a new snapshot of each share partition whose latest one is older than the cold
        snapshot interval, on every loaded partition; returns once those are durable."""
        for runner in list(self._runners.values()):
            if runner.state is not PartitionState.ACTIVE or not self._serving():
                continue
            runner.run_scheduled(
                functools.partial(self._cold_snapshots, runner), "share_state.cold_snapshot_failed"
            )
            await _writes_settled(runner)  # on a failure the partition reloads; the next pass tries again

    def _cold_snapshots(self, runner: PartitionRunner, now_ms: int) -> CoordinatorResult:
        interval_ms = self._cold_snapshot_interval_ms
        return _state_shard(runner).snapshot_cold_partitions(now_ms, interval_ms, runner.log.log_end_offset)

    def _log_end(self, shard: ShareStateShard) -> int:
        """Where the shard's log ends now: the records of an operation run now land at or after it."""
        runner = self._runners.get(shard.partition)
        return -1 if runner is None else runner.log.log_end_offset

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None:
        """This node owns ``partition`` of ``__share_group_state`` now (a cluster): load its state."""
        self._start_timers()
        await super().acquire(partition, partition_log)

    def _start_timers(self) -> None:
        if not self._driver.running:
            self._driver.start()

    async def stop(self) -> None:
        if self._started is not None:
            self._started.cancel()
        await super().stop()

    def read_state(self, key: ShareStateKey) -> StoredShareState | None:
        """ReadShareGroupState: the stored state of one share partition (raises while loading)."""

        def read(shard: ShareStateShard) -> StoredShareState | None:
            return shard.read_state(key.group_id, key.topic_id, key.partition)

        return self.read(key.coordinator_key, read)

    async def read_for_leader(self, key: ShareStateKey, leader_epoch: int = -1) -> StoredShareState | None:
        """ReadShareGroupState as a share partition's leader asks it when it loads the partition:
        the stored state, once a newer ``leader_epoch`` than the stored one is durable (fencing the
        previous leader's writes). Raises KafkaError (FENCED_LEADER_EPOCH, NOT_COORDINATOR, ...)."""
        await self.ensure_started()
        if leader_epoch == -1:
            return self.read_state(key)

        def operation(shard: ShareStateShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            return shard.read_state_for_leader(sink, key, leader_epoch, now_ms, self._log_end(shard))

        code, stored = await self.write(key.coordinator_key, operation)
        if code != ErrorCode.none:
            raise KafkaError(code, f"the state of {key.group_id} {key.topic_id}:{key.partition} was not read")
        result: StoredShareState | None = stored
        return result

    async def write_state(self, write: StateWrite, leader_epoch: int = -1) -> ErrorCode:
        """WriteShareGroupState: answered once the ShareUpdate or ShareSnapshot is durable."""

        def operation(shard: ShareStateShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            return shard.write_state(
                sink,
                write.key,
                state_epoch=write.state_epoch,
                leader_epoch=leader_epoch,
                start_offset=write.start_offset,
                batches=write.batches,
                now_ms=now_ms,
                delivery_complete_count=write.delivery_complete_count,
                log_end=self._log_end(shard),
            )

        code: ErrorCode = await self.write(write.key.coordinator_key, operation)
        return code

    async def initialize_state(self, key: ShareStateKey, start_offset: int) -> ErrorCode:
        """InitializeShareGroupState at the next state epoch: the share partition starts at
        ``start_offset`` with nothing in flight (AlterShareGroupOffsets)."""
        await self.ensure_started()
        stored = self.read_state(key)
        state_epoch = 0 if stored is None else stored.state_epoch + 1

        def operation(shard: ShareStateShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            return shard.initialize_state(sink, key, state_epoch, start_offset, now_ms, self._log_end(shard))

        code: ErrorCode = await self.write(key.coordinator_key, operation)
        return code

    async def stored_state(self, key: ShareStateKey) -> StoredShareState | None:
        """:meth:`read_state` once the coordinator runs; None when ``__share_group_state`` does not exist."""
        if not self._state_topic.exists():
            return None
        await self.ensure_started()
        return self.read_state(key)

    async def delete_states(self, keys: list[ShareStateKey]) -> None:
        """DeleteShareGroupState for ``keys`` (tombstones, durable when this returns)."""
        if not self._state_topic.exists():
            return
        await self.ensure_started()
        for key in keys:

            def delete(
                shard: ShareStateShard, sink: Sink, now_ms: int, key: ShareStateKey = key
            ) -> CoordinatorResult:
                return shard.delete_state(sink, key, self._log_end(shard))

            await self.write(key.coordinator_key, delete)

    async def delete_group_states(self, group_ids: list[str]) -> None:
        """DeleteShareGroupState for every share partition of the groups (tombstones, durable when
        this returns); nothing to do when ``__share_group_state`` does not exist."""
        if not self._state_topic.exists():
            return
        await self.ensure_started()
        wanted = set(group_ids)
        keys = [
            ShareStateKey(group_id, topic_id, partition)
            for shard in self.active_shards()
            for group_id, topic_id, partition in shard.share_partitions()
            if group_id in wanted
        ]
        await self.delete_states(keys)


async def _writes_settled(runner: PartitionRunner) -> bool:
    """Wait until every write already made to the runner's partition is durable; False when one
    failed (the partition then reloads from its log)."""
    settled = Sink()
    runner.after_writes(settled)
    runner.watch(settled)
    try:
        await settled
    except KafkaError:
        return False
    finally:
        runner.unwatch(settled)
    return True


def _state_shard(runner: PartitionRunner) -> ShareStateShard:
    shard = runner.shard
    assert isinstance(shard, ShareStateShard)
    return shard


def new_state_shard(config: ShareGroupConfig) -> Callable[[int, Timer], Shard]:
    """The shard factory of ``__share_group_state`` partitions."""

    def factory(partition: int, timer: Timer) -> Shard:
        shard: Shard = ShareStateShard(partition, config)
        return shard

    return factory
