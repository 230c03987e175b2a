"""The share-state shard: epochs fence writes, updates merge, a snapshot every N updates, replay = live."""

from __future__ import annotations

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
from kcoord.coordinator.share.state_shard import ShareStateShard, StoredShareState, merge_batches
from kcoord.protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=42)
KEY = ShareStateKey("g", TOPIC, 0)
SINK = object()


def records_of(result: CoordinatorResult) -> list[ShareStateRecord]:
    held: list[ShareStateRecord] = list(result.records)  # type: ignore[arg-type]
    return held


def reloaded(shard_log: list[ShareStateRecord], config: ShareGroupConfig) -> ShareStateShard:
    """A fresh shard fed the log's records through their bytes, as a load after a restart does."""
    shard = ShareStateShard(0, config)
    for offset, record in enumerate(shard_log):
        decoded = decode_state_record(encode_state_key(record.key), encode_state_value(record.value))
        assert decoded is not None
        shard.replay(decoded, offset, -1, -1)
    return shard


def write(
    shard: ShareStateShard,
    log: list[ShareStateRecord],
    start: int,
    *batches: StateBatch,
    state_epoch: int = 0,
    leader_epoch: int = 1,
) -> ErrorCode:
    result = shard.write_state(
        SINK,
        KEY,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start,
        batches=batches,
        now_ms=5,
    )
    log.extend(records_of(result))
    ((sink, code),) = result.responses
    assert sink is SINK
    error: ErrorCode = code
    return error


def test_merge_overlays_changed_runs_and_drops_what_is_below_the_start() -> None:
    """Changed runs replace the stored ones where they overlap; runs below the start offset go."""
    stored = (StateBatch(0, 9, 0, 1),)
    merged = merge_batches(stored, (StateBatch(3, 4, 2, 1), StateBatch(9, 12, 4, 2)), 2)
    assert merged == (
        StateBatch(2, 2, 0, 1),
        StateBatch(3, 4, 2, 1),
        StateBatch(5, 8, 0, 1),
        StateBatch(9, 12, 4, 2),
    )
    assert merge_batches(merged, (StateBatch(2, 2, 2, 1),), 0)[:1] == (StateBatch(2, 4, 2, 1),)


def test_the_first_write_is_a_snapshot_and_later_ones_are_updates() -> None:
    """A share partition with no state gets a snapshot; later writes are updates of the changed runs."""
    shard, log = ShareStateShard(0), list[ShareStateRecord]()
    assert write(shard, log, 0, StateBatch(0, 4, 0, 1)) == ErrorCode.none
    assert write(shard, log, -1, StateBatch(1, 1, 2, 1)) == ErrorCode.none
    assert [type(r.value) for r in log] == [ShareSnapshotValue, ShareUpdateValue]
    assert log[1].value == ShareUpdateValue(0, 1, -1, (StateBatch(1, 1, 2, 1),))
    stored = shard.read_state("g", TOPIC, 0)
    assert stored is not None
    assert stored.state_batches == (StateBatch(0, 0, 0, 1), StateBatch(1, 1, 2, 1), StateBatch(2, 4, 0, 1))


def test_a_snapshot_follows_every_n_updates_and_replay_matches_live_state() -> None:
    """After ``snapshot.update.records.per.snapshot`` updates the next write is a snapshot; reload agrees."""
    config = ShareGroupConfig(snapshot_update_records_per_snapshot=3)
    shard, log = ShareStateShard(0, config), list[ShareStateRecord]()
    write(shard, log, 0, StateBatch(0, 9, 0, 1))
    for offset in range(5):
        write(shard, log, offset + 1 if offset % 2 else -1, StateBatch(offset, offset, 2, 1))
    kinds = ["S" if r.key.snapshot else "U" for r in log]
    assert kinds == ["S", "U", "U", "U", "S", "U"]
    snapshot = log[4].value
    assert isinstance(snapshot, ShareSnapshotValue) and snapshot.snapshot_epoch == 1
    again = reloaded(log, config)
    assert again.read_state("g", TOPIC, 0) == shard.read_state("g", TOPIC, 0)
    stored = again.read_state("g", TOPIC, 0)
    assert stored is not None and stored.start_offset == 4


def test_older_state_or_leader_epochs_are_fenced_and_write_nothing() -> None:
    """A writer with an older state epoch gets FENCED_STATE_EPOCH, an older leader FENCED_LEADER_EPOCH."""
    shard, log = ShareStateShard(0), list[ShareStateRecord]()
    write(shard, log, 0, StateBatch(0, 0, 0, 1), state_epoch=2, leader_epoch=5)
    assert write(shard, log, 1, state_epoch=1, leader_epoch=5) == ErrorCode.fenced_state_epoch
    assert write(shard, log, 1, state_epoch=2, leader_epoch=4) == ErrorCode.fenced_leader_epoch
    assert len(log) == 1
    assert write(shard, log, 1, state_epoch=2, leader_epoch=6) == ErrorCode.none


def test_initialize_and_delete_state() -> None:
    """Initialize writes a snapshot (start offset, new state epoch); delete writes both tombstones."""
    shard = ShareStateShard(0)
    init = shard.initialize_state(SINK, KEY, 3, 100, now_ms=9)
    stored = shard.read_state("g", TOPIC, 0)
    assert stored is not None and (stored.state_epoch, stored.start_offset, stored.state_batches) == (
        3,
        100,
        (),
    )
    stale = shard.initialize_state(SINK, KEY, 2, 0, now_ms=9)
    assert stale.records == [] and stale.responses == [(SINK, ErrorCode.fenced_state_epoch)]
    deleted = records_of(shard.delete_state(SINK, KEY))
    assert [(r.key.snapshot, r.value) for r in deleted] == [(True, None), (False, None)]
    assert shard.read_state("g", TOPIC, 0) is None
    assert reloaded(records_of(init) + deleted, ShareGroupConfig()).share_partitions() == []


def test_an_update_whose_snapshot_is_gone_is_ignored_at_replay() -> None:
    """An update left after its snapshot's tombstone (compaction order) does not resurrect the state."""
    shard = ShareStateShard(0)
    shard.replay(ShareStateRecord(KEY.as_update(), ShareUpdateValue(0, 1, 5, ())))
    assert shard.read_state("g", TOPIC, 0) is None


def read_for_leader(
    shard: ShareStateShard, log: list[ShareStateRecord], leader_epoch: int
) -> tuple[ErrorCode, StoredShareState | None]:
    result = shard.read_state_for_leader(SINK, KEY, leader_epoch, now_ms=7)
    log.extend(records_of(result))
    ((_, answer),) = result.responses
    code, stored = answer
    return code, stored


def test_a_newer_leader_epoch_read_is_made_durable_and_fences_the_previous_leader() -> None:
    """A read under a newer leader epoch writes that epoch (nothing else changes) and answers the state;
    the previous leader's next write and a read under an older epoch are FENCED_LEADER_EPOCH; a read
    under the same epoch or -1 writes nothing; the epoch survives a reload."""
    config = ShareGroupConfig()
    shard, log = ShareStateShard(0, config), list[ShareStateRecord]()
    assert write(shard, log, 0, StateBatch(0, 4, 2, 1), leader_epoch=1) == ErrorCode.none
    before = len(log)
    code, stored = read_for_leader(shard, log, 2)
    assert code == ErrorCode.none and stored is not None
    assert (stored.leader_epoch, stored.start_offset, stored.state_batches) == (
        2,
        0,
        (StateBatch(0, 4, 2, 1),),
    )
    assert len(log) == before + 1, "the new epoch is written"
    assert write(shard, log, -1, StateBatch(5, 5, 2, 1), leader_epoch=1) == ErrorCode.fenced_leader_epoch
    assert read_for_leader(shard, log, 1) == (ErrorCode.fenced_leader_epoch, None)
    for same in (2, -1):
        assert read_for_leader(shard, log, same)[0] == ErrorCode.none
    assert len(log) == before + 1, "reads under the stored epoch (or none) write nothing"
    reloaded_state = reloaded(log, config).read_state(KEY.group_id, KEY.topic_id, KEY.partition)
    assert reloaded_state is not None and reloaded_state.leader_epoch == 2


def test_a_leader_read_of_no_state_writes_nothing() -> None:
    """A share partition nobody wrote yet is answered None under any epoch, with no record."""
    shard, log = ShareStateShard(0, ShareGroupConfig()), list[ShareStateRecord]()
    assert read_for_leader(shard, log, 3) == (ErrorCode.none, None)
    assert log == []
