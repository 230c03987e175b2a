"""The issue's acceptance scenarios at the core level: a share partition whose changes are written to the
share-state shard, with a manual clock, and a crash modelled as a reload of the shard from its records."""

from __future__ import annotations

import uuid

from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partition_state import AcknowledgeType, SharePartition, StateBatch
from kcoord.coordinator.share.state_records import (
    ShareStateKey,
    ShareStateRecord,
    decode_state_record,
    encode_state_key,
    encode_state_value,
)
from kcoord.coordinator.share.state_shard import ShareStateShard
from kcoord.protocol.errors import ErrorCode

ACCEPT, RELEASE, REJECT = (
    int(AcknowledgeType.ACCEPT),
    int(AcknowledgeType.RELEASE),
    int(AcknowledgeType.REJECT),
)
KEY = ShareStateKey("queue", uuid.UUID(int=7), 0)
LOG_END = 100


class DurableSharePartition:
    """A share partition's leader as the wiring will be: every change is written before it is answered."""

    def __init__(self, config: ShareGroupConfig, shard: ShareStateShard, log: list[ShareStateRecord]) -> None:
        self.config, self.shard, self.log = config, shard, log
        stored = shard.read_state(KEY.group_id, KEY.topic_id, KEY.partition)
        if stored is None:
            self.share = SharePartition.initialised(config, 0, LOG_END, "earliest")
            self.persist(self.share.state_batches())
        else:
            self.share = SharePartition.restored(config, stored.start_offset, stored.state_batches)

    def persist(self, changed: list[StateBatch]) -> None:
        result = self.shard.write_state(
            None,
            KEY,
            state_epoch=0,
            leader_epoch=0,
            start_offset=self.share.start_offset,
            batches=changed,
            now_ms=0,
            delivery_complete_count=self.share.delivery_complete_count(),
        )
        assert result.responses == [(None, ErrorCode.none)]
        self.log.extend(result.records)  # type: ignore[arg-type]

    def fetch(self, member: str, now_ms: int, max_records: int = 10) -> list[tuple[int, int]]:
        """(offset, delivery count) of each record the member gets."""
        start = self.share.next_fetch_offset()
        runs = self.share.acquire(member, start, LOG_END - 1, now_ms, max_records)
        return [(o, run.delivery_count) for run in runs for o in range(run.first_offset, run.last_offset + 1)]

    def ack(self, member: str, offsets: list[int], kind: int) -> None:
        self.persist(self.share.acknowledge(member, [(o, o, kind) for o in offsets]))

    def expire(self, now_ms: int) -> None:
        self.persist(self.share.expire_locks(now_ms))


def restart(log: list[ShareStateRecord], config: ShareGroupConfig) -> DurableSharePartition:
    """kcoord killed and restarted: the shard replays its records' bytes, the leader reads the shard."""
    shard = ShareStateShard(0, config)
    for offset, record in enumerate(log):
        decoded = decode_state_record(encode_state_key(record.key), encode_state_value(record.value))
        assert decoded is not None
        shard.replay(decoded, offset, -1, -1)
    return DurableSharePartition(config, shard, log)


def test_released_records_are_redelivered_with_a_higher_count_and_rejected_ones_never() -> None:
    """Explicit mode: a release brings the record back (delivery 2); a reject removes it for good."""
    config = ShareGroupConfig()
    leader = DurableSharePartition(config, ShareStateShard(0, config), [])
    assert leader.fetch("c1", 0, 3) == [(0, 1), (1, 1), (2, 1)]
    leader.ack("c1", [0], RELEASE)
    leader.ack("c1", [1], REJECT)
    leader.ack("c1", [2], ACCEPT)
    assert leader.fetch("c2", 0, 3) == [(0, 2), (3, 1), (4, 1)]
    delivered_later = [o for o, _ in leader.fetch("c2", 0, 200)]
    assert 1 not in delivered_later


def test_a_record_released_limit_times_is_archived_and_skipped() -> None:
    """Released ``delivery.count.limit`` times, the record is archived and the next fetch skips it."""
    config = ShareGroupConfig(delivery_count_limit=3)
    leader = DurableSharePartition(config, ShareStateShard(0, config), [])
    for delivery in (1, 2, 3):
        assert leader.fetch("c1", 0, 1) == [(0, delivery)]
        leader.ack("c1", [0], RELEASE)
    assert leader.fetch("c1", 0, 1) == [(1, 1)]
    assert leader.share.start_offset == 1


def test_an_expired_lock_hands_the_records_to_another_member() -> None:
    """A member that stops acknowledging loses its records at the lock deadline; another member gets them."""
    config = ShareGroupConfig(record_lock_duration_ms=30_000)
    leader = DurableSharePartition(config, ShareStateShard(0, config), [])
    assert leader.fetch("stopped", 0, 5) == [(o, 1) for o in range(5)]
    assert leader.fetch("c2", 29_999, 5) == [(o, 1) for o in range(5, 10)]
    leader.expire(30_000)
    assert leader.fetch("c2", 30_000, 5) == [(o, 2) for o in range(5)]


def test_after_a_crash_acknowledged_records_never_return_and_unacknowledged_ones_do() -> None:
    """Replay of the durable state: every accepted record stays done; every acquired-unacknowledged one is
    delivered again (with its delivery count kept from released ones)."""
    config = ShareGroupConfig(snapshot_update_records_per_snapshot=4)
    log: list[ShareStateRecord] = []
    leader = DurableSharePartition(config, ShareStateShard(0, config), log)
    accepted: set[int] = set()
    for round_ in range(6):
        got = [o for o, _ in leader.fetch("c1", round_, 10)]
        leader.ack("c1", got[::2], ACCEPT)
        accepted.update(got[::2])
    leader.ack("c1", [1], RELEASE)
    unacknowledged = set(range(LOG_END)) - accepted
    assert any(r.key.snapshot for r in log[1:])  # snapshots were taken along the way

    after = restart(log, config)
    redelivered: dict[int, int] = {}
    for _ in range(20):
        batch = after.fetch("c2", 0, 50)
        if not batch:
            break
        redelivered.update(batch)
        after.ack("c2", [o for o, _ in batch], ACCEPT)
    assert set(redelivered) == unacknowledged
    assert not set(redelivered) & accepted
    assert redelivered[1] == 2
    assert after.share.start_offset == LOG_END
