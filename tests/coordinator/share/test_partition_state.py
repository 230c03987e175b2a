"""The share partition's record states: acquire, acknowledge, locks, delivery counts, the start offset."""

from __future__ import annotations

import pytest

from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partition_state import (
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    SharePartition,
    StateBatch,
    acknowledgement_ranges,
)
from kcoord.protocol.errors import ErrorCode, KafkaError

ACCEPT = int(AcknowledgeType.ACCEPT)
RELEASE = int(AcknowledgeType.RELEASE)
REJECT = int(AcknowledgeType.REJECT)
GAP = int(AcknowledgeType.GAP)
LOCK_MS = 30_000


def partition(**settings: int) -> SharePartition:
    return SharePartition(ShareGroupConfig(**settings), 0)  # type: ignore[arg-type]


def test_acquire_locks_new_records_for_the_member_with_delivery_count_one() -> None:
    """Fetched offsets past the end are acquired by the fetching member, delivery 1, lock = now + duration."""
    share = partition()
    assert share.acquire("m1", 0, 9, now_ms=1_000) == [AcquiredRecords(0, 9, 1)]
    assert (share.start_offset, share.end_offset) == (0, 10)
    assert share.record_state(3) == (RecordState.ACQUIRED, 1, "m1")
    assert share.next_lock_deadline() == 1_000 + LOCK_MS
    assert share.next_fetch_offset() == 10


def test_acquired_records_are_not_acquired_by_another_member() -> None:
    """While records are locked, a second member's fetch of the same offsets acquires only new ones."""
    share = partition()
    share.acquire("m1", 0, 4, now_ms=0)
    assert share.acquire("m2", 0, 7, now_ms=0) == [AcquiredRecords(5, 7, 1)]
    assert share.record_state(2) == (RecordState.ACQUIRED, 1, "m1")


def test_accept_completes_the_head_and_moves_the_start_offset() -> None:
    """Accepting the head acknowledges it; the start offset moves past every completed head record."""
    share = partition()
    share.acquire("m1", 0, 9, now_ms=0)
    changed = share.acknowledge("m1", [(0, 3, ACCEPT)])
    assert share.start_offset == 4
    assert changed == []  # everything changed is below the new start offset: the start says it all
    changed = share.acknowledge("m1", [(6, 7, ACCEPT)])
    assert share.start_offset == 4
    assert changed == [StateBatch(6, 7, int(RecordState.ACKNOWLEDGED), 1)]
    share.acknowledge("m1", [(4, 5, ACCEPT), (8, 9, ACCEPT)])
    assert (share.start_offset, share.end_offset) == (10, 10)


def test_release_makes_a_record_available_again_with_a_higher_delivery_count() -> None:
    """A released record is delivered again (to any member), its delivery count one higher."""
    share = partition()
    share.acquire("m1", 0, 2, now_ms=0)
    changed = share.acknowledge("m1", [(1, 1, RELEASE), (0, 0, ACCEPT), (2, 2, ACCEPT)])
    assert changed == [
        StateBatch(1, 1, int(RecordState.AVAILABLE), 1),
        StateBatch(2, 2, int(RecordState.ACKNOWLEDGED), 1),
    ]
    assert share.start_offset == 1
    assert share.next_fetch_offset() == 1
    assert share.acquire("m2", 1, 2, now_ms=0) == [AcquiredRecords(1, 1, 2)]


def test_reject_archives_a_record_for_good() -> None:
    """A rejected record is archived and never acquired again."""
    share = partition()
    share.acquire("m1", 0, 1, now_ms=0)
    share.acknowledge("m1", [(0, 0, REJECT)])
    assert share.start_offset == 1
    assert share.acquire("m2", 0, 1, now_ms=0) == []
    assert share.record_state(0) is None


def test_a_record_released_delivery_count_limit_times_is_archived_and_skipped() -> None:
    """Released ``group.share.delivery.count.limit`` times, a record is archived and later fetches skip it."""
    share = partition(delivery_count_limit=3)
    assert share.acquire("m1", 0, 1, now_ms=0) == [AcquiredRecords(0, 1, 1)]
    share.acknowledge("m1", [(0, 0, RELEASE), (1, 1, ACCEPT)])
    for delivery in (2, 3):
        assert share.acquire("m1", 0, 1, now_ms=0) == [AcquiredRecords(0, 0, delivery)]
        share.acknowledge("m1", [(0, 0, RELEASE)])
    assert share.record_state(0) is None
    assert share.start_offset == 2
    assert share.acquire("m1", 0, 1, now_ms=0) == []


def test_an_expired_lock_makes_records_available_to_another_member() -> None:
    """At the lock deadline the records go back to Available and another member acquires them (delivery 2)."""
    share = partition(record_lock_duration_ms=1_000)
    share.acquire("m1", 0, 4, now_ms=0)
    assert share.expire_locks(999) == []
    changed = share.expire_locks(1_000)
    assert changed == [StateBatch(0, 4, int(RecordState.AVAILABLE), 1)]
    assert share.next_lock_deadline() is None
    assert share.acquire("m2", 0, 4, now_ms=1_000) == [AcquiredRecords(0, 4, 2)]
    with pytest.raises(KafkaError) as late:
        share.acknowledge("m1", [(0, 0, ACCEPT)])
    assert late.value.code == ErrorCode.invalid_record_state


def test_an_expired_lock_at_the_delivery_limit_archives() -> None:
    """A lock that expires on the last allowed delivery archives the record."""
    share = partition(record_lock_duration_ms=10, delivery_count_limit=2)
    share.acquire("m1", 0, 0, now_ms=0)
    share.expire_locks(10)
    share.acquire("m1", 0, 0, now_ms=10)
    share.expire_locks(20)
    assert (share.start_offset, share.record_state(0)) == (1, None)


def test_acknowledging_what_the_member_does_not_hold_is_invalid_record_state_and_changes_nothing() -> None:
    """Another member's, an acknowledged or an out-of-window record: INVALID_RECORD_STATE, no change."""
    share = partition()
    share.acquire("m1", 0, 4, now_ms=0)
    share.acknowledge("m1", [(2, 2, ACCEPT)])
    for member, ranges in (
        ("m2", [(0, 0, ACCEPT)]),
        ("m1", [(0, 0, ACCEPT), (2, 2, ACCEPT)]),
        ("m1", [(0, 0, ACCEPT), (4, 5, ACCEPT)]),
    ):
        with pytest.raises(KafkaError) as refused:
            share.acknowledge(member, ranges)
        assert refused.value.code == ErrorCode.invalid_record_state
    assert share.record_state(0) == (RecordState.ACQUIRED, 1, "m1")
    assert share.record_state(4) == (RecordState.ACQUIRED, 1, "m1")
    assert share.start_offset == 0


def test_a_malformed_acknowledgement_is_invalid_request() -> None:
    """An unknown acknowledge type or a range whose last offset precedes its first: INVALID_REQUEST."""
    share = partition()
    share.acquire("m1", 0, 4, now_ms=0)
    for bad in ((0, 0, 5), (3, 1, ACCEPT), (-1, 0, ACCEPT)):
        with pytest.raises(KafkaError) as refused:
            share.acknowledge("m1", [bad])
        assert refused.value.code == ErrorCode.invalid_request


def test_a_gap_acknowledgement_archives_the_offset() -> None:
    """Acknowledge type 0 (a gap, no record at that offset) completes the offset like a reject."""
    share = partition()
    share.acquire("m1", 0, 1, now_ms=0)
    share.acknowledge("m1", [(0, 0, GAP), (1, 1, ACCEPT)])
    assert share.start_offset == 2


def test_the_window_stops_at_max_record_locks_and_max_records() -> None:
    """New records only while the window is under max.record.locks; max_records caps one fetch."""
    share = partition(partition_max_record_locks=5)
    assert share.acquire("m1", 0, 9, now_ms=0) == [AcquiredRecords(0, 4, 1)]
    assert share.acquire("m2", 5, 9, now_ms=0) == []
    share.acknowledge("m1", [(0, 1, ACCEPT)])
    assert share.acquire("m2", 5, 9, now_ms=0, max_records=1) == [AcquiredRecords(5, 5, 1)]
    assert share.acquire("m2", 5, 9, now_ms=0) == [AcquiredRecords(6, 6, 1)]


def test_a_leaving_member_releases_only_its_own_records() -> None:
    """When a member leaves, its acquired records become Available; other members keep theirs."""
    share = partition()
    share.acquire("m1", 0, 2, now_ms=0)
    share.acquire("m2", 3, 5, now_ms=0)
    assert share.release_member("m1") == [StateBatch(0, 2, int(RecordState.AVAILABLE), 1)]
    assert share.record_state(4) == (RecordState.ACQUIRED, 1, "m2")
    assert share.next_fetch_offset() == 0


def test_auto_offset_reset_picks_the_log_start_or_end() -> None:
    """``share.auto.offset.reset``: latest (the default) starts at the log end, earliest at the log start."""
    config = ShareGroupConfig()
    assert SharePartition.initialised(config, 5, 42).start_offset == 42
    assert SharePartition.initialised(config, 5, 42, "earliest").start_offset == 5
    assert SharePartition.initialised(ShareGroupConfig(auto_offset_reset="earliest"), 5, 42).start_offset == 5
    with pytest.raises(KafkaError) as refused:
        SharePartition.initialised(config, 5, 42, "nearest")
    assert refused.value.code == ErrorCode.invalid_config


def test_reset_start_offset_forgets_the_window() -> None:
    """AlterShareGroupOffsets: the window is dropped and delivery starts again at the new offset."""
    share = partition()
    share.acquire("m1", 0, 9, now_ms=0)
    share.acknowledge("m1", [(0, 9, ACCEPT)])
    share.reset_start_offset(0)
    assert (share.start_offset, share.end_offset) == (0, 0)
    assert share.acquire("m1", 0, 9, now_ms=0) == [AcquiredRecords(0, 9, 1)]


def test_describe_counts_states_and_lag() -> None:
    """Describe gives the window, the count in each state, and lag = log end - start - completed records."""
    share = partition()
    share.acquire("m1", 0, 9, now_ms=0)
    share.acknowledge("m1", [(2, 3, ACCEPT), (4, 4, REJECT), (5, 6, RELEASE)])
    view = share.describe(log_end_offset=20)
    assert (view.start_offset, view.end_offset) == (0, 10)
    assert (view.available, view.acquired, view.acknowledged, view.archived) == (2, 5, 2, 1)
    assert view.lag == 20 - 0 - 3
    assert share.delivery_complete_count() == 3


def test_restore_redelivers_what_was_not_acknowledged() -> None:
    """Restored from durable runs: done records stay done, the rest is Available with its count."""
    config = ShareGroupConfig()
    batches = [StateBatch(10, 11, 2, 1), StateBatch(12, 12, 0, 3), StateBatch(14, 15, 4, 5)]
    share = SharePartition.restored(config, 10, batches)
    assert share.start_offset == 12
    assert share.end_offset == 16
    assert share.record_state(12) == (RecordState.AVAILABLE, 3, None)
    assert share.record_state(13) == (RecordState.AVAILABLE, 0, None)
    assert share.acquire("m1", 12, 20, now_ms=0) == [
        AcquiredRecords(12, 12, 4),
        AcquiredRecords(13, 13, 1),
        AcquiredRecords(16, 20, 1),
    ]


def test_state_batches_write_acquired_records_as_available_without_their_delivery() -> None:
    """The persisted window never holds Acquired: as KIP-932 says, an Acquired record with delivery
    count 1 is recorded as Available with count 0, so a crash delivers it again with the same count."""
    share = partition()
    share.acquire("m1", 0, 4, now_ms=0)
    share.acknowledge("m1", [(1, 1, ACCEPT), (3, 3, REJECT)])
    assert share.state_batches() == [
        StateBatch(0, 0, 0, 0),
        StateBatch(1, 1, 2, 1),
        StateBatch(2, 2, 0, 0),
        StateBatch(3, 3, 4, 1),
        StateBatch(4, 4, 0, 0),
    ]


def test_a_delivery_count_is_persisted_on_release_not_on_acquisition() -> None:
    """As Kafka's SharePartition: acquiring writes nothing; each expired lock writes the record Available
    with its count; a record re-acquired before that write is written with the count of its release.
    Restored after a crash, a record acquired three times (two locks expired) comes back with count 2
    and is delivered with count 3 again: the unfinished third delivery is forgotten."""
    share = partition(record_lock_duration_ms=10)
    share.acquire("m1", 0, 0, now_ms=0)
    assert share.expire_locks(now_ms=10) == [StateBatch(0, 0, 0, 1)]
    share.acquire("m1", 0, 0, now_ms=20)
    assert share.expire_locks(now_ms=30) == [StateBatch(0, 0, 0, 2)]
    share.acquire("m2", 0, 0, now_ms=40)
    assert share.record_state(0) == (RecordState.ACQUIRED, 3, "m2")
    assert share.begin_round(changed=[0]) == (0, [StateBatch(0, 0, 0, 2)], 0)
    share.end_round(durable=True)
    restored = SharePartition.restored(ShareGroupConfig(), 0, [StateBatch(0, 0, 0, 2)])
    assert restored.acquire("m3", 0, 0, now_ms=0) == [AcquiredRecords(0, 0, 3)]


def test_a_fetch_past_the_end_archives_the_skipped_offsets_and_log_start_moves_the_window() -> None:
    """Offsets the log no longer has (before a fetch, below the log start) are never delivered."""
    share = partition()
    share.acquire("m1", 5, 6, now_ms=0)
    assert share.start_offset == 5
    share.advance_to_log_start(6)
    assert share.start_offset == 6
    assert share.record_state(5) is None


def test_offsets_the_log_skipped_are_archived_in_a_bounded_window() -> None:
    """A fetch far past the end jumps an empty window; behind in-flight records the skipped offsets are
    archived only while the window has room, so a huge gap never fills memory."""
    share = partition(partition_max_record_locks=4)
    assert share.acquire("m1", 1_000_000_000, 1_000_000_001, now_ms=0) == [
        AcquiredRecords(1_000_000_000, 1_000_000_001, 1)
    ]
    assert share.start_offset == 1_000_000_000
    share.acknowledge("m1", [(1_000_000_001, 1_000_000_001, ACCEPT)])
    assert share.acquire("m1", 2_000_000_000, 2_000_000_000, now_ms=0) == []
    assert share.end_offset - share.start_offset == 4
    share.acknowledge("m1", [(1_000_000_000, 1_000_000_000, ACCEPT)])
    assert share.start_offset == 1_000_000_004
    assert share.record_state(1_000_000_004) is None


def test_an_acknowledgement_batch_has_one_type_or_one_per_offset() -> None:
    """One type covers the batch; one type per offset gives a range each; other counts: INVALID_REQUEST."""
    assert acknowledgement_ranges(3, 5, (ACCEPT,)) == [(3, 5, ACCEPT)]
    assert acknowledgement_ranges(3, 5, (ACCEPT, RELEASE, GAP)) == [
        (3, 3, ACCEPT),
        (4, 4, RELEASE),
        (5, 5, GAP),
    ]
    for types in ((), (ACCEPT, ACCEPT)):
        with pytest.raises(KafkaError) as refused:
            acknowledgement_ranges(3, 5, types)
        assert refused.value.code == ErrorCode.invalid_request


def test_a_staged_acknowledgement_changes_nothing_until_its_round_is_durable() -> None:
    """A staged acknowledgement keeps its records Acquired (no expiry, release or second acknowledgement
    takes them); the round's write shows the state as if settled, and only end_round(durable) settles it."""
    share = partition(record_lock_duration_ms=100)
    share.acquire("m1", 0, 9, now_ms=0)
    share.stage("m1", [(0, 3, ACCEPT), (4, 4, REJECT), (5, 5, RELEASE)])
    assert share.expire_locks(now_ms=1_000) == [StateBatch(6, 9, 0, 1)]
    assert share.release_member("m1") == []
    with pytest.raises(KafkaError) as twice:
        share.stage("m1", [(0, 0, ACCEPT)])
    assert twice.value.code == ErrorCode.invalid_record_state
    assert share.record_state(0) == (RecordState.ACQUIRED, 1, "m1")
    start, batches, done = share.begin_round()
    assert (start, batches, done) == (5, [StateBatch(5, 5, 0, 1)], 0)
    assert share.start_offset == 0 and share.next_lock_deadline() is None
    assert share.end_round(durable=True) == {
        AcknowledgeType.ACCEPT: 4,
        AcknowledgeType.REJECT: 1,
        AcknowledgeType.RELEASE: 1,
    }
    assert share.start_offset == 5 and share.record_state(5) == (RecordState.AVAILABLE, 1, None)


def test_a_failed_round_rolls_its_acknowledgements_back() -> None:
    """When the round's write fails its acknowledgements are unstaged: the records are Acquired by
    their member as before, the start offset has not moved, and their lock runs again."""
    share = partition(record_lock_duration_ms=100)
    share.acquire("m1", 0, 4, now_ms=0)
    share.stage("m1", [(0, 4, ACCEPT)])
    assert share.begin_round()[0] == 5
    assert share.end_round(durable=False) == {}
    assert share.start_offset == 0 and share.record_state(0) == (RecordState.ACQUIRED, 1, "m1")
    assert share.next_lock_deadline() == 100
    assert share.expire_locks(now_ms=100) == [StateBatch(0, 4, 0, 1)]
    assert share.acquire("m2", 0, 4, now_ms=200) == [AcquiredRecords(0, 4, 2)]


def test_acknowledgements_staged_during_a_round_wait_for_the_next() -> None:
    """A round takes only what was staged before it began; what is staged meanwhile is left for the next."""
    share = partition()
    share.acquire("m1", 0, 1, now_ms=0)
    share.acquire("m2", 2, 3, now_ms=0)
    share.stage("m1", [(0, 1, ACCEPT)])
    share.begin_round()
    share.stage("m2", [(2, 3, ACCEPT)])
    share.end_round(durable=True)
    assert share.start_offset == 2 and share.has_staged()
    assert share.begin_round() == (4, [], 0)
    share.end_round(durable=True)
    assert share.start_offset == 4 and not share.has_staged()


def test_a_renewal_extends_the_lock_at_once_and_stages_nothing() -> None:
    """A renew acknowledgement (KIP-1222) moves its records' lock to now + the lock duration, keeps
    them Acquired by the member with their delivery count, and stages nothing for a write; in the
    same request an accept is staged as usual."""
    share = partition(record_lock_duration_ms=100)
    share.acquire("m1", 0, 3, now_ms=0)
    assert share.stage("m1", [(0, 1, int(AcknowledgeType.RENEW)), (2, 2, ACCEPT)], now_ms=80) == 2
    assert share.record_state(0) == (RecordState.ACQUIRED, 1, "m1")
    assert share.begin_round() == (0, [StateBatch(2, 2, 2, 1)], 1), "only the accept is written"
    share.end_round(durable=True)
    assert share.expire_locks(now_ms=100) == [StateBatch(3, 3, 0, 1)], "only the unrenewed record"
    assert share.next_lock_deadline() == 180
    assert share.stage("m1", [(0, 1, ACCEPT)], now_ms=150) == 0
    share.begin_round()
    share.end_round(durable=True)
    assert share.start_offset == 3


def test_a_renewal_of_records_the_member_does_not_hold_is_refused_whole() -> None:
    """Renewing an offset another member holds, or one already released, is INVALID_RECORD_STATE and
    changes nothing, not even the lock of the records it does hold."""
    share = partition(record_lock_duration_ms=100)
    share.acquire("m1", 0, 1, now_ms=0)
    share.acquire("m2", 2, 2, now_ms=0)
    renew = int(AcknowledgeType.RENEW)
    for ranges in ([(0, 2, renew)], [(5, 5, renew)]):
        with pytest.raises(KafkaError) as refused:
            share.stage("m1", ranges, now_ms=50)
        assert refused.value.code == ErrorCode.invalid_record_state
    assert share.next_lock_deadline() == 100
    share.release_member("m1")
    with pytest.raises(KafkaError):
        share.stage("m1", [(0, 0, renew)], now_ms=60)
