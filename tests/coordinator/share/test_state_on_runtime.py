"""The share-state shard on the real coordinator runtime: writes answer after durability and a restart
reloads the same state by replaying ``__share_group_state`` (the runtime, loader and serde of groups)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partition_state import StateBatch
from kcoord.coordinator.share.state_records import (
    SHARE_STATE_TOPIC,
    ShareStateKey,
    ShareStateSerde,
    state_partition_for,
)
from kcoord.coordinator.share.state_shard import ShareStateShard, StoredShareState
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.coordinator_type import CoordinatorShard, CoordinatorType
from kcoord.runtime.service import CoordinatorService
from kcoord.storage.api import PartitionLog
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.api import Timer
from kcoord.timer.clock import SystemClock

PARTITIONS = 3
CONFIG = ShareGroupConfig(snapshot_update_records_per_snapshot=2)
SHARE = CoordinatorType("share", SHARE_STATE_TOPIC, 2, state_partition_for, ShareStateSerde())
KEY = ShareStateKey("queue", uuid.UUID(int=99), 4)


class StateTopic:
    def __init__(self, store: MemoryLogStore) -> None:
        self.store = store

    async def ensure_topic(self, partitions: int) -> int:
        for partition in range(partitions):
            if self.store.get(SHARE_STATE_TOPIC, partition) is None:
                await self.store.create(SHARE_STATE_TOPIC, partition)
        return partitions

    def partition_log(self, partition: int) -> PartitionLog | None:
        return self.store.get(SHARE_STATE_TOPIC, partition)


def new_shard(partition: int, timer: Timer) -> CoordinatorShard:
    shard: CoordinatorShard = ShareStateShard(partition, CONFIG)
    return shard


async def started(store: MemoryLogStore) -> CoordinatorService:
    service = CoordinatorService(
        SHARE, StateTopic(store), SystemClock(), new_shard, num_partitions=PARTITIONS
    )
    await service.start()
    await asyncio.wait_for(service.loaded.wait(), 5)
    return service


async def write(service: CoordinatorService, start: int, *batches: StateBatch) -> ErrorCode:
    def operation(shard: Any, sink: Any, now_ms: int) -> Any:
        return shard.write_state(
            sink, KEY, state_epoch=0, leader_epoch=0, start_offset=start, batches=batches, now_ms=now_ms
        )

    code: ErrorCode = await service.write(KEY.coordinator_key, operation)
    return code


def read(service: CoordinatorService) -> StoredShareState | None:
    found: StoredShareState | None = service.read(
        KEY.coordinator_key, lambda shard: shard.read_state(KEY.group_id, KEY.topic_id, KEY.partition)
    )
    return found


async def test_share_state_is_written_durably_and_reloaded_by_replay() -> None:
    """Writes (a snapshot, updates, a second snapshot) go to the key's partition; a new service replays
    them into the same stored state."""
    store = MemoryLogStore()
    await store.open()
    service = await started(store)
    assert await write(service, 0, StateBatch(0, 9, 0, 1)) == ErrorCode.none
    assert await write(service, 3, StateBatch(3, 4, 2, 1)) == ErrorCode.none
    assert await write(service, -1, StateBatch(5, 5, 4, 5)) == ErrorCode.none
    assert await write(service, 6, StateBatch(6, 6, 0, 2)) == ErrorCode.none
    live = read(service)
    await service.stop()
    partition_log = store.get(SHARE_STATE_TOPIC, state_partition_for(KEY.coordinator_key, PARTITIONS))
    assert partition_log is not None and partition_log.log_end_offset == 4

    again = await started(store)
    assert read(again) == live
    assert live is not None and live.start_offset == 6
    assert live.state_batches == (StateBatch(6, 6, 0, 2), StateBatch(7, 9, 0, 1))
    await again.stop()
    await store.close()
