"""Consumer groups in the offsets log: Kafka's byte layout of key types 3-8, and replay after a restart."""

from __future__ import annotations

import uuid

import pytest
from consumer_harness import GROUP, Harness, pairs

from kcoord.coordinator.consumer.group import ConsumerGroupState
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from kcoord.coordinator.record_codec import decode_record, encode_key, encode_value
from kcoord.coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
)

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
RECORDS = [
    CoordinatorRecord(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7)),
    CoordinatorRecord(
        ConsumerGroupPartitionMetadataKey("g"),
        ConsumerGroupPartitionMetadataValue(((TOPIC_ID, "orders", 6),)),
    ),
    CoordinatorRecord(
        ConsumerGroupMemberMetadataKey("g", "m"),
        ConsumerGroupMemberMetadataValue(
            "i", None, "client", "/127.0.0.1", ("orders",), None, 30000, "uniform"
        ),
    ),
    CoordinatorRecord(
        ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(7)
    ),
    CoordinatorRecord(
        ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        ConsumerGroupTargetAssignmentMemberValue(((TOPIC_ID, (0, 1, 2)),)),
    ),
    CoordinatorRecord(
        ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        ConsumerGroupCurrentMemberAssignmentValue(7, 6, 1, ((TOPIC_ID, (0, 1)),), ((TOPIC_ID, (5,)),)),
    ),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r.key).__name__)
def test_consumer_records_round_trip(record: CoordinatorRecord) -> None:
    """Every consumer group record and its tombstone decode to what was encoded."""
    key = encode_key(record.key)
    assert decode_record(key, encode_value(record.value)) == record
    assert decode_record(key, None) == CoordinatorRecord(record.key, None)


def test_layout_matches_kafka() -> None:
    """Key type 3 and a v0 flexible value with an empty tagged-field section, byte for byte."""
    record = RECORDS[0]
    assert encode_key(record.key) == b"\x00\x03\x00\x01g"
    assert encode_value(record.value) == b"\x00\x00\x00\x00\x00\x07\x00"
    # Kafka 4.1 writes the metadata hash as tag 0: it is skipped.
    tagged = b"\x00\x00\x00\x00\x00\x07\x01\x00\x08" + b"\x00" * 8
    assert decode_record(b"\x00\x03\x00\x01g", tagged) == record


def _replayed(h: Harness) -> Harness:
    """A second manager loaded from the first one's records, through their bytes."""
    fresh = Harness(h.topics)
    for record in h.records:
        decoded = decode_record(encode_key(record.key), encode_value(record.value))
        assert decoded is not None
        fresh.manager.replay(decoded.key, decoded.value)  # type: ignore[arg-type]
    fresh.manager.on_loaded(fresh.now)
    return fresh


def _state(h: Harness) -> tuple[object, ...]:
    group = h.group
    return (group.group_epoch, group.target_epoch, group.partitions_per_topic, group.members, group.target)


def test_replay_rebuilds_a_reconciling_group() -> None:
    """Mid-revocation, the replayed group has the same epochs, members, states and targets."""
    h = Harness()
    a = h.beat("a", 0, topics=("orders",), owned={})
    h.beat("b", 0, topics=("orders",), owned={}, instance_id="i-b")
    h.beat("a", a.member_epoch, owned=a.assignment)
    assert h.group.state is ConsumerGroupState.RECONCILING
    loaded = _replayed(h)
    assert _state(loaded) == _state(h)
    # The loaded members go on where they were: a revokes, b then gets its partitions.
    kept = h.group.members["a"].assigned
    assert loaded.beat("a", a.member_epoch, owned=kept).member_epoch == loaded.group.target_epoch
    b = loaded.group.members["b"]
    answer = loaded.beat("b", b.member_epoch, owned={})
    assert len(pairs(answer.assignment)) == 3
    assert loaded.group.state is ConsumerGroupState.STABLE


def test_replay_drops_removed_members_and_deleted_groups() -> None:
    """Tombstones of a left member and of a deleted group leave nothing behind."""
    h = Harness()
    a = h.beat("a", 0, topics=("orders",), owned={})
    h.beat("b", 0, topics=("orders",), owned={})
    h.beat("b", -1)
    assert set(_replayed(h).group.members) == {"a"}
    h.beat("a", -1)
    h.records.extend(h.manager.delete_group(GROUP).records)
    assert not _replayed(h).manager.has_group(GROUP)
    assert a.member_epoch > 0


def test_loaded_members_get_fresh_sessions() -> None:
    """After a load every member has a session deadline: one that never returns expires."""
    h = Harness()
    h.beat("a", 0, topics=("orders",), owned={})
    loaded = _replayed(h)
    loaded.advance(60_000)
    assert loaded.group.members == {}


def _regex_join(h: Harness, member_id: str, allowed: set[str]) -> ConsumerHeartbeatResponse:
    request = ConsumerHeartbeatRequest(
        group_id=GROUP,
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_regex="orders.*",
        owned={},
        topic_filter=allowed.__contains__,
    )
    return h.send(request)


def test_a_regex_resolves_only_to_what_the_members_principal_may_see() -> None:
    """Only the topics the heartbeat's filter passes are resolved, also when topics appear later;
    after a load a new topic is added only once the member's heartbeat brings its filter again."""
    h = Harness({"orders": 2, "orders-secret": 2})
    joined = _regex_join(h, "a", {"orders", "orders-new"})
    assert pairs(joined.assignment) == {("orders", 0), ("orders", 1)}
    h.topics["orders-hidden"] = 1
    h.topics_changed("orders-hidden")
    assert h.group.members["a"].regex_topics == {"orders"}
    loaded = _replayed(h)
    assert loaded.group.members["a"].regex_topics == {"orders", "orders-secret", "orders-hidden"}
    loaded.topics["orders-new"] = 1
    loaded.topics_changed("orders-new")
    assert "orders-new" not in loaded.group.members["a"].regex_topics
    beat = ConsumerHeartbeatRequest(
        group_id=GROUP,
        member_id="a",
        member_epoch=joined.member_epoch,
        owned=loaded.group.members["a"].assigned,
        topic_filter={"orders", "orders-new"}.__contains__,
    )
    loaded.send(beat)
    assert loaded.group.members["a"].regex_topics == {"orders", "orders-new"}
    assert set(loaded.group.target["a"]) == {"orders", "orders-new"}
