"""Pruning ``__share_group_state`` on real files: the share coordinator moves each state partition's log
start up to what its shard no longer needs, the segments below it go, and a restart rebuilds the same
state from the shorter log; the periodic passes (pruning, cold snapshots) do it on their own."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from pathlib import Path

from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partition_state import StateBatch
from kcoord.coordinator.share.partitions import StateWrite
from kcoord.coordinator.share.state_records import SHARE_STATE_TOPIC, ShareStateKey
from kcoord.coordinator.share.state_shard import StoredShareState
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.share_coordinator import ShareCoordinator, ShareStateTopicOf, new_state_shard
from kcoord.storage.api import LogConfig, PartitionLog
from kcoord.storage.file_store import FileLogStore
from kcoord.timer.clock import SystemClock

TOPIC = uuid.UUID(int=1818)
PARTITIONS = 2
CONFIG = ShareGroupConfig(snapshot_update_records_per_snapshot=4)
SMALL_SEGMENTS = LogConfig(segment_bytes=4096, index_interval_bytes=512)
KEYS = [ShareStateKey("queue", TOPIC, partition) for partition in range(6)]


class StateTopic:
    """``__share_group_state`` in a real file store, as the topic catalogue makes it."""

    def __init__(self, store: FileLogStore) -> None:
        self.store = store

    def partition_log(self, name: str, partition: int) -> PartitionLog | None:
        return self.store.get(name, partition)

    def partitions(self) -> int | None:
        return PARTITIONS if self.store.get(SHARE_STATE_TOPIC, 0) is not None else None

    async def create(self, partitions: int, configs: Mapping[str, str]) -> None:
        for partition in range(partitions):
            await self.store.create(SHARE_STATE_TOPIC, partition)


async def opened(data: Path) -> FileLogStore:
    store = FileLogStore(data, SMALL_SEGMENTS)
    await store.open()
    return store


async def started(store: FileLogStore, **intervals: int) -> ShareCoordinator:
    topic = StateTopic(store)
    state = ShareCoordinator(
        ShareStateTopicOf(topic, topic.partitions, topic.create),
        SystemClock(),
        new_state_shard(CONFIG),
        num_partitions=PARTITIONS,
        **intervals,
    )
    await state.ensure_started()
    return state


def state_logs(store: FileLogStore) -> list[PartitionLog]:
    logs = [store.get(SHARE_STATE_TOPIC, partition) for partition in range(PARTITIONS)]
    assert all(partition_log is not None for partition_log in logs)
    return [partition_log for partition_log in logs if partition_log is not None]


async def acknowledge(state: ShareCoordinator, key: ShareStateKey, offset: int) -> None:
    """The leader's write for ``offset`` accepted: every third write also moves the start offset."""
    start = offset - 2 if offset % 3 == 0 and offset >= 2 else -1
    write = StateWrite(key, 0, start, (StateBatch(offset, offset, 2, 1),), -1)
    assert await state.write_state(write) == ErrorCode.none


def stored(state: ShareCoordinator) -> dict[ShareStateKey, StoredShareState | None]:
    return {key: state.read_state(key) for key in KEYS}


async def test_pruned_state_reloads_the_same_from_a_shorter_log(tmp_path: Path) -> None:
    """Many acknowledgements of six share partitions, then one pruning pass: each state log starts
    later and lost whole segments; after a restart the coordinator holds the same state as before,
    replaying only what is left."""
    store = await opened(tmp_path / "data")
    state = await started(store, prune_interval_ms=3_600_000, cold_snapshot_interval_ms=3_600_000)
    for offset in range(120):
        for key in KEYS:
            await acknowledge(state, key, offset)
    before = stored(state)
    written = sum(partition_log.log_end_offset for partition_log in state_logs(store))
    sizes = [partition_log.size_bytes for partition_log in state_logs(store)]
    removed = await state.prune_state_log()
    starts = [partition_log.log_start_offset for partition_log in state_logs(store)]
    print(f"written={written} removed={removed} starts={starts} sizes={sizes}")
    assert removed > written // 2
    assert all(start > 0 for start in starts)
    assert all(pl.size_bytes < size for pl, size in zip(state_logs(store), sizes, strict=True))
    assert await state.prune_state_log() == 0, "nothing more until something new is written"
    await state.stop()
    await store.close()

    store = await opened(tmp_path / "data")
    try:
        assert [partition_log.log_start_offset for partition_log in state_logs(store)] == starts
        again = await started(store, prune_interval_ms=3_600_000, cold_snapshot_interval_ms=3_600_000)
        try:
            replayed = sum(runner.load_stats.records for runner in again.all_runners())
            print(f"replayed={replayed}")
            assert replayed == written - removed
            assert stored(again) == before
        finally:
            await again.stop()
    finally:
        await store.close()


async def test_the_periodic_passes_prune_past_an_idle_share_partition(tmp_path: Path) -> None:
    """With short intervals and no call of its own: an idle share partition's old snapshot gets a cold
    snapshot, and pruning then moves the log start past where that old snapshot was."""
    store = await opened(tmp_path / "data")
    state = await started(store, prune_interval_ms=50, cold_snapshot_interval_ms=100)
    try:
        idle, busy = (
            KEYS[0],
            next(key for key in KEYS[1:] if partition_of(state, key) == partition_of(state, KEYS[0])),
        )
        await acknowledge(state, idle, 0)
        partition_log = state_logs(store)[partition_of(state, idle)]
        idle_snapshot_end = partition_log.log_end_offset
        for offset in range(40):
            await acknowledge(state, busy, offset)
        for _ in range(200):
            if partition_log.log_start_offset >= idle_snapshot_end:
                break
            await asyncio.sleep(0.05)
        assert partition_log.log_start_offset >= idle_snapshot_end
        idle_state = state.read_state(idle)
        assert idle_state is not None and idle_state.state_batches == (StateBatch(0, 0, 2, 1),)
    finally:
        await state.stop()
        await store.close()


def partition_of(state: ShareCoordinator, key: ShareStateKey) -> int:
    return state.partition_for(key.coordinator_key)
