"""Pruning ``__share_group_state``: the shard names the offset below which a load needs nothing (the
oldest latest snapshot), live writes count at the log end they were told, cold share partitions get
a fresh snapshot, and a reload of only the records from that offset on rebuilds the same state."""

from __future__ import annotations

import random
import uuid

from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partition_state import StateBatch
from kcoord.coordinator.share.state_records import (
    ShareSnapshotValue,
    ShareStateKey,
    ShareStateRecord,
    ShareUpdateValue,
    decode_state_record,
    encode_state_key,
    encode_state_value,
)
from kcoord.coordinator.share.state_shard import ShareStateShard
from kcoord.protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=7)
SINK = object()


def key(partition: int) -> ShareStateKey:
    return ShareStateKey("g", TOPIC, partition)


def snapshot(start: int, now_ms: int = 0) -> ShareSnapshotValue:
    return ShareSnapshotValue(0, 0, 0, start, now_ms, now_ms, ())


class LiveLog:
    """A shard written live, with the log its records would make (offsets assigned in order)."""

    def __init__(self, config: ShareGroupConfig) -> None:
        self.config = config
        self.shard = ShareStateShard(0, config)
        self.records: list[ShareStateRecord] = []

    def take(self, result: CoordinatorResult) -> None:
        self.records.extend(result.records)  # type: ignore[arg-type]

    def write(self, target: ShareStateKey, start: int, *batches: StateBatch, now_ms: int = 0) -> None:
        result = self.shard.write_state(
            SINK,
            target,
            state_epoch=0,
            leader_epoch=0,
            start_offset=start,
            batches=batches,
            now_ms=now_ms,
            log_end=len(self.records),
        )
        assert result.responses == [(SINK, ErrorCode.none)]
        self.take(result)

    def delete(self, target: ShareStateKey) -> None:
        self.take(self.shard.delete_state(SINK, target, len(self.records)))

    def reloaded_from(self, first_offset: int) -> ShareStateShard:
        """A fresh shard fed the log's records from ``first_offset`` on, through their bytes."""
        shard = ShareStateShard(0, self.config)
        for offset in range(first_offset, len(self.records)):
            record = self.records[offset]
            decoded = decode_state_record(encode_state_key(record.key), encode_state_value(record.value))
            assert decoded is not None
            shard.replay(decoded, offset, -1, -1)
        return shard


def states(shard: ShareStateShard) -> dict[tuple[str, uuid.UUID, int], object]:
    return {partition: shard.read_state(*partition) for partition in shard.share_partitions()}


def test_at_load_the_redundant_offset_is_the_oldest_latest_snapshot() -> None:
    """Replayed with their offsets: each share partition's latest snapshot counts, updates do not, a
    deleted share partition stops counting, and with none left everything replayed is redundant."""
    shard = ShareStateShard(0)
    assert shard.redundant_below() == 0
    shard.replay(ShareStateRecord(key(1), snapshot(0)), 0)
    shard.replay(ShareStateRecord(key(1).as_update(), ShareUpdateValue(0, 0, 3, ())), 1)
    shard.replay(ShareStateRecord(key(2), snapshot(0)), 2)
    assert shard.redundant_below() == 0
    shard.replay(ShareStateRecord(key(1), snapshot(5)), 3)
    assert shard.redundant_below() == 2, "key 2's only snapshot is now the oldest needed"
    shard.replay(ShareStateRecord(key(2), None), 4)
    shard.replay(ShareStateRecord(key(2).as_update(), None), 5)
    assert shard.redundant_below() == 3
    shard.replay(ShareStateRecord(key(1), None), 6)
    assert shard.redundant_below() == 7, "no share partition left: everything replayed goes"


def test_live_writes_count_at_the_log_end_they_were_told() -> None:
    """A live snapshot is counted at the log end its operation was given (a lower bound of its offset),
    so the answer never passes a record a load needs."""
    live = LiveLog(ShareGroupConfig(snapshot_update_records_per_snapshot=2))
    live.write(key(1), 0, StateBatch(0, 9, 0, 1))
    for offset in range(6):
        live.write(key(1), -1, StateBatch(offset, offset, 2, 1))
    kinds = "".join("S" if record.key.snapshot else "U" for record in live.records)
    assert kinds == "SUUSUUS"
    assert live.shard.redundant_below() == 6
    assert states(live.reloaded_from(6)) == states(live.shard)
    assert live.reloaded_from(6).redundant_below() == 6, "a load counts the same offset"


def test_a_reload_from_the_redundant_offset_rebuilds_every_share_partition() -> None:
    """Random writes, snapshots and deletes of several share partitions: replaying only the records from
    the redundant offset on gives the same stored state as the live shard, at every step."""
    rng = random.Random(18)
    live = LiveLog(ShareGroupConfig(snapshot_update_records_per_snapshot=3))
    starts = dict.fromkeys(range(5), 0)
    for _ in range(400):
        partition = rng.randrange(5)
        if rng.random() < 0.03 and live.shard.read_state("g", TOPIC, partition) is not None:
            live.delete(key(partition))
            starts[partition] = 0
            continue
        first = starts[partition] + rng.randrange(4)
        batch = StateBatch(first, first + rng.randrange(3), rng.choice((0, 2, 4)), rng.randrange(1, 4))
        moved = rng.random() < 0.3
        if moved:
            starts[partition] += 1
        live.write(key(partition), starts[partition] if moved else -1, batch)
        below = live.shard.redundant_below()
        assert states(live.reloaded_from(below)) == states(live.shard)
    assert live.shard.redundant_below() > len(live.records) // 2, "most of the log is redundant"


def test_a_cold_share_partition_gets_a_new_snapshot_that_frees_the_log_behind_it() -> None:
    """An idle share partition holds the redundant offset at its old snapshot; the cold pass writes it
    again (same state, next snapshot epoch, write time now), and a pass in which every latest snapshot
    is already a cold one with nothing written since writes nothing."""
    live = LiveLog(ShareGroupConfig(snapshot_update_records_per_snapshot=1))
    live.write(key(1), 3, StateBatch(3, 5, 2, 1), now_ms=0)
    for offset in range(6):
        live.write(key(2), -1, StateBatch(offset, offset, 2, 1), now_ms=10)
    assert live.shard.redundant_below() == 0, "the idle key 1 holds it down"
    assert live.shard.snapshot_cold_partitions(now_ms=50, interval_ms=100).records == []
    result = live.shard.snapshot_cold_partitions(now_ms=100, interval_ms=100, log_end=len(live.records))
    (record,) = result.records
    assert isinstance(record, ShareStateRecord) and isinstance(record.value, ShareSnapshotValue)
    value = record.value
    assert (value.snapshot_epoch, value.create_timestamp, value.write_timestamp) == (1, 0, 100)
    live.take(result)
    assert live.shard.redundant_below() > 0
    assert states(live.reloaded_from(live.shard.redundant_below())) == states(live.shard)
    cold = live.shard.read_state("g", TOPIC, 1)
    assert cold is not None and cold.cold_snapshot and cold.state_batches == (StateBatch(3, 5, 2, 1),)
    again = live.shard.snapshot_cold_partitions(now_ms=500, interval_ms=100, log_end=len(live.records))
    assert len(again.records) == 2, "key 2 is not cold-snapshotted yet, so every old snapshot goes again"
    live.take(again)
    assert live.shard.snapshot_cold_partitions(now_ms=900, interval_ms=100).records == []
