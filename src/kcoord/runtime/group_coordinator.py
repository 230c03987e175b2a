"""The group coordinator's wiring on the generic runtime: its topic, partitions, records and hooks.

Groups and their committed offsets live in ``__consumer_offsets``, a group on partition
``partition_for(group_id)`` (Kafka's ``abs(hashCode) % partitions``). Its records are Kafka's
offsets-log records (:mod:`kcoord.coordinator.record_codec`); at load, offset commits (nearly all
of the log) take a shortcut that replays their fields without building record objects.
:class:`GroupCoordinator` is the :class:`~kcoord.runtime.service.CoordinatorService` of that type,
plus what only groups do: heartbeats answered at once, disconnect hints, topic changes and the
periodic offset expiry. This is the one module of the runtime that names the offsets topic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from kcoord.coordinator.classic.messages import HeartbeatRequest
from kcoord.coordinator.offset_commit_batch import OffsetCommitBatches
from kcoord.coordinator.offsets import CommittedOffset
from kcoord.coordinator.partitioner import partition_for
from kcoord.coordinator.record_codec import (
    decode_offset_commit_fields,
    decode_record,
    encode_key,
    encode_value,
)
from kcoord.coordinator.records import CoordinatorRecord, OffsetCommitKey, RecordKey
from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.share.group_records import ShareGroupRecord
from kcoord.protocol.control_batch import encode_transactional_batch
from kcoord.protocol.plain_batch import EncodedBatch, encode_for_log
from kcoord.runtime.coordinator_type import CoordinatorType, FastReplay
from kcoord.runtime.runner import Shard
from kcoord.runtime.service import CoordinatorService
from kcoord.storage.api import PartitionLog
from kcoord.timer.api import Clock, Timer

__all__ = ["GROUP_COORDINATOR", "OFFSETS_TOPIC", "GroupCoordinator", "GroupRecordSerde", "OffsetsTopic"]

OFFSETS_TOPIC = "__consumer_offsets"
GROUP_KEY_TYPE = 0

_KEPT_KEYS = 1 << 16
_other_keys = functools.lru_cache(maxsize=_KEPT_KEYS)(encode_key)
_offset_keys: dict[tuple[str, str, int], bytes] = {}


def _encoded_key(key: RecordKey) -> bytes:
    """A group commits the same partitions again and again: their key bytes are worth keeping.

    Offset commit keys are kept by ``(group, topic, partition)`` (a tuple hashes and compares in C;
    the dataclass's own ``__hash__`` and ``__eq__`` are Python calls), the oldest dropped first."""
    if type(key) is not OffsetCommitKey:
        return _other_keys(key)
    fields = (key.group, key.topic, key.partition)
    encoded = _offset_keys.get(fields)
    if encoded is None:
        if len(_offset_keys) >= _KEPT_KEYS:
            del _offset_keys[next(iter(_offset_keys))]
        encoded = _offset_keys[fields] = encode_key(key)
    return encoded


class GroupRecordSerde:
    """The offsets log's records: Kafka's key and value schemas (:mod:`kcoord.coordinator.record_codec`)."""

    def __init__(self) -> None:
        self._offset_commits = OffsetCommitBatches()

    def encode_batch(self, records: list[CoordinatorRecord], now_ms: int) -> EncodedBatch:
        """Offset commits (the commit path's batches) are laid out in one pass, others the general way."""
        batch = self._offset_commits.encode(records, now_ms)
        if batch is not None:
            return batch
        return encode_for_log([(_encoded_key(r.key), encode_value(r.value)) for r in records], now_ms)

    def encode_transactional_batch(
        self, records: list[CoordinatorRecord], producer_id: int, producer_epoch: int, now_ms: int
    ) -> EncodedBatch:
        """TxnOffsetCommit's records: a transactional batch of the producer, pending until its marker."""
        entries: list[tuple[bytes | None, bytes | None]] = [
            (_encoded_key(r.key), encode_value(r.value)) for r in records
        ]
        return encode_transactional_batch(entries, producer_id, producer_epoch, now_ms)

    def decode(self, key: bytes, value: bytes | None) -> CoordinatorRecord | ShareGroupRecord | None:
        return decode_record(key, value)

    def fast_replay(self, shard: Any) -> FastReplay | None:
        """Offset commits straight into the shard's offsets (:meth:`replay_offset`), when it has that."""
        replay_offset = getattr(shard, "replay_offset", None)
        if replay_offset is None:
            return None

        def replay(key: bytes, value: bytes | None) -> bool:
            fields = decode_offset_commit_fields(key, value)
            if fields is None:
                return False
            group, topic, partition, committed = fields
            replay_offset(group, topic, partition, None if committed is None else CommittedOffset(*committed))
            return True

        return replay


GROUP_COORDINATOR = CoordinatorType(
    name="group",
    topic=OFFSETS_TOPIC,
    key_type=GROUP_KEY_TYPE,
    partition_for=partition_for,
    serde=GroupRecordSerde(),
    log_name="offsets_partitions",
)


class OffsetsTopic(Protocol):
    """What the group coordinator needs of the topic catalogue."""

    async def ensure_offsets_topic(self, partitions: int) -> int:
        """Create ``__consumer_offsets`` if missing; return its real partition count."""

    def partition_log(self, name: str, partition: int) -> PartitionLog | None: ...


class _OffsetsTopicOf:
    """The catalogue's offsets topic as the generic service sees a coordinator's topic."""

    def __init__(self, topics: OffsetsTopic) -> None:
        self._topics = topics

    async def ensure_topic(self, partitions: int) -> int:
        return await self._topics.ensure_offsets_topic(partitions)

    def partition_log(self, partition: int) -> PartitionLog | None:
        return self._topics.partition_log(OFFSETS_TOPIC, partition)


class GroupCoordinator(CoordinatorService):
    """The group coordinator: the generic service over ``__consumer_offsets``, plus the group hooks."""

    def __init__(
        self,
        topics: OffsetsTopic,
        clock: Clock,
        shard_factory: Callable[[int, Timer], Shard],
        *,
        expiry_interval_ms: int,
        **options: Any,
    ) -> None:
        """``options``: :class:`CoordinatorService`'s (``num_partitions``, ``append_timeout_ms``,
        ``observer``, ``owned_only``, ``serving``)."""
        super().__init__(GROUP_COORDINATOR, _OffsetsTopicOf(topics), clock, shard_factory, **options)
        self._expiry_interval_ms = expiry_interval_ms

    async def start(self) -> None:
        """Create the offsets topic if needed, start loading every partition, then expire offsets."""
        await super().start()
        self.run_periodically(self._expiry_interval_ms, _expire_offsets, "coordinator.offset_expiry_failed")

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

    def member_disconnected(self, group_id: str, member_id: str, connection_id: int) -> None:
        """A connection that carried this member closed (fast-failover hint; see classic/liveness.py)."""
        runner = self.loaded_runner(group_id)
        if runner is not None:
            shard: Any = runner.shard
            runner.run(lambda now: shard.member_disconnected(group_id, member_id, connection_id, now))

    def partitions_added(self, topic: str) -> None:
        """A topic grew: every shard rebalances the groups subscribed to it."""
        self.run_on_active(functools.partial(_partitions_added, topic=topic))

    def topic_changed(self, topic: str) -> None:
        """A topic was created or deleted: every shard updates the consumer groups subscribed to it."""
        self.run_on_active(functools.partial(_topic_changed, topic=topic))


def _partitions_added(shard: Any, now_ms: int, *, topic: str) -> CoordinatorResult:
    result: CoordinatorResult = shard.on_partitions_added(topic, now_ms)
    return result


def _topic_changed(shard: Any, now_ms: int, *, topic: str) -> CoordinatorResult:
    result: CoordinatorResult = shard.on_topic_changed(topic, now_ms)
    return result


def _expire_offsets(shard: Any, now_ms: int) -> CoordinatorResult:
    result: CoordinatorResult = shard.expire_offsets(now_ms)
    return result
