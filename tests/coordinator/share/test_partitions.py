"""The share partitions a leader holds: loading from stored state, writes for every durable change, one
lock deadline for all, members leaving, alter and describe; the writes round-trip through the state shard."""

from __future__ import annotations

import uuid

import pytest

from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partition_state import AcknowledgeType, AcquiredRecords
from kcoord.coordinator.share.partitions import ShareGroupPartitions, StateWrite
from kcoord.coordinator.share.state_records import ShareStateKey
from kcoord.coordinator.share.state_shard import ShareStateShard
from kcoord.protocol.errors import ErrorCode, KafkaError

TP0, TP1 = (uuid.UUID(int=1), 0), (uuid.UUID(int=1), 1)
ACCEPT, RELEASE = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE)


def persist(shard: ShareStateShard, write: StateWrite | None) -> None:
    assert write is not None
    result = shard.write_state(
        None,
        write.key,
        state_epoch=write.state_epoch,
        leader_epoch=0,
        start_offset=write.start_offset,
        batches=write.batches,
        now_ms=0,
        delivery_complete_count=write.delivery_complete_count,
    )
    assert result.responses == [(None, ErrorCode.none)]


def test_a_new_share_partition_is_initialised_and_written_before_use() -> None:
    """No stored state: the start offset comes from auto.offset.reset and the initial state is a write."""
    partitions = ShareGroupPartitions(ShareGroupConfig())
    write = partitions.load("g", TP0, None, log_start=3, log_end=10, reset="earliest")
    assert write is not None and (write.start_offset, write.batches) == (3, ())
    assert partitions.load("g", TP1, None, log_start=3, log_end=10) is not None
    tp1 = partitions.get("g", TP1)
    assert tp1 is not None and tp1.start_offset == 10


def test_changes_become_writes_and_a_new_leader_continues_from_them() -> None:
    """Acks, expiry and a leaving member each give a write; a leader loading the stored state redelivers
    exactly what was not acknowledged, with its delivery count."""
    config = ShareGroupConfig(record_lock_duration_ms=100)
    shard, leader = ShareStateShard(0, config), ShareGroupPartitions(config)
    persist(shard, leader.load("g", TP0, None, 0, 10, "earliest"))
    persist(shard, leader.load("g", TP1, None, 0, 10, "earliest"))
    assert leader.acquire("g", "m1", TP0, (0, 9), now_ms=0, max_records=4) == [AcquiredRecords(0, 3, 1)]
    assert leader.acquire("g", "m2", TP1, (0, 9), now_ms=50, max_records=2) == [AcquiredRecords(0, 1, 1)]
    assert leader.acquire("g", "m2", TP0, (4, 9), now_ms=50, max_records=2) == [AcquiredRecords(4, 5, 1)]
    persist(shard, leader.acknowledge("g", "m1", TP0, [(0, 1, ACCEPT), (2, 2, RELEASE)]))
    assert leader.next_lock_deadline() == 100
    expired = leader.expire_locks(100)
    assert [w.key.partition for w in expired] == [0]
    for write in expired:
        persist(shard, write)
    released = leader.release_member("g", "m2")
    assert sorted(w.key.partition for w in released) == [0, 1]
    for write in released:
        persist(shard, write)

    successor = ShareGroupPartitions(config)
    for tp in (TP0, TP1):
        assert successor.load("g", tp, shard.read_state("g", *tp), 0, 10) is None
    assert successor.acquire("g", "m3", TP0, (2, 9), now_ms=0) == [
        AcquiredRecords(2, 5, 2),
        AcquiredRecords(6, 9, 1),
    ]
    assert successor.acquire("g", "m3", TP1, (0, 9), now_ms=0)[0] == AcquiredRecords(0, 1, 2)


def test_alter_describe_forget_and_unknown_partitions() -> None:
    """Alter sets the start offset (a write); describe gives start and lag per partition; forgetting drops it;
    acknowledging a partition not led is UNKNOWN_TOPIC_OR_PARTITION."""
    partitions = ShareGroupPartitions(ShareGroupConfig())
    partitions.load("g", TP0, None, 0, 10, "earliest")
    partitions.acquire("g", "m1", TP0, (0, 9), now_ms=0)
    partitions.acknowledge("g", "m1", TP0, [(0, 4, ACCEPT)])
    view = partitions.describe("g", {TP0: 12})[TP0]
    assert (view.start_offset, view.acquired, view.lag) == (5, 5, 7)
    write = partitions.alter_start_offset("g", TP0, 0)
    assert (write.start_offset, write.batches) == (0, ())
    assert partitions.describe("g", {TP0: 12})[TP0].lag == 12
    assert partitions.alter_start_offset("g", TP1, 8).start_offset == 8
    partitions.forget("g", TP0)
    assert partitions.get("g", TP0) is None and list(partitions.describe("g", {})) == [TP1]
    with pytest.raises(KafkaError) as unknown:
        partitions.acknowledge("g", "m1", TP0, [(0, 0, ACCEPT)])
    assert unknown.value.code == ErrorCode.unknown_topic_or_partition


def test_state_initialised_by_the_group_coordinator_starts_at_the_reset_and_keeps_its_state_epoch() -> None:
    """Stored state with start offset -1 (InitializeShareGroupState) is started by auto.offset.reset and
    written back with the state epoch the group coordinator gave it."""
    shard = ShareStateShard(0)
    key_tp = TP0
    shard.initialize_state(None, ShareStateKey("g", *key_tp), 4, -1, now_ms=0)
    partitions = ShareGroupPartitions(ShareGroupConfig())
    write = partitions.load("g", key_tp, shard.read_state("g", *key_tp), 2, 10, "earliest")
    assert write is not None and (write.state_epoch, write.start_offset) == (4, 2)
    persist(shard, write)
    stored = shard.read_state("g", *key_tp)
    assert stored is not None and (stored.state_epoch, stored.start_offset) == (4, 2)
