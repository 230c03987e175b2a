"""``__share_group_state`` records: Kafka's byte layout, round trips, and the state partition of a key."""

from __future__ import annotations

import uuid

import pytest

from kcoord.coordinator.partitioner import java_string_hash
from kcoord.coordinator.record_io import RecordDecodeError, UnsupportedRecordVersionError
from kcoord.coordinator.share.partition_state import StateBatch
from kcoord.coordinator.share.state_records import (
    ShareSnapshotValue,
    ShareStateKey,
    ShareStateRecord,
    ShareUpdateValue,
    decode_state_record,
    encode_state_key,
    encode_state_value,
    state_partition_for,
    topic_id_text,
)

TOPIC = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
BATCHES = (StateBatch(10, 12, 2, 1), StateBatch(13, 13, 0, 3), StateBatch(14, 20, 4, 5))


def round_trip(record: ShareStateRecord) -> ShareStateRecord | None:
    return decode_state_record(encode_state_key(record.key), encode_state_value(record.value))


@pytest.mark.parametrize(
    "record",
    [
        ShareStateRecord(ShareStateKey("g", TOPIC, 3), ShareSnapshotValue(2, 1, 7, 10, 111, 222, BATCHES, 4)),
        ShareStateRecord(ShareStateKey("g", TOPIC, 3), ShareSnapshotValue(0, 0, -1, 0, 1, 1, ())),
        ShareStateRecord(ShareStateKey("gé", TOPIC, 0, False), ShareUpdateValue(2, 7, -1, BATCHES)),
        ShareStateRecord(ShareStateKey("g", TOPIC, 0, False), ShareUpdateValue(2, 7, 15, (), 9)),
        ShareStateRecord(ShareStateKey("g", TOPIC, 1), None),
    ],
)
def test_every_share_state_record_survives_a_round_trip(record: ShareStateRecord) -> None:
    """Snapshots, updates (with or without the KIP-1226 tagged count), tombstones decode as encoded."""
    assert round_trip(record) == record


def test_the_snapshot_key_and_value_bytes_follow_kafkas_layout() -> None:
    """Key: int16 type, int16-length group id, topic id, int32 partition; value: version 0, flexible."""
    key = encode_state_key(ShareStateKey("g", TOPIC, 3))
    assert key == b"\x00\x00" + b"\x00\x01g" + TOPIC.bytes + b"\x00\x00\x00\x03"
    value = encode_state_value(ShareSnapshotValue(1, 2, 3, 4, 5, 6, (StateBatch(4, 4, 0, 1),)))
    assert value is not None
    expected = (
        b"\x00\x00"  # version
        + (1).to_bytes(4, "big")
        + (2).to_bytes(4, "big")
        + (3).to_bytes(4, "big")
        + (4).to_bytes(8, "big")
        + (5).to_bytes(8, "big")
        + (6).to_bytes(8, "big")
        + b"\x02"  # compact array of one
        + (4).to_bytes(8, "big")
        + (4).to_bytes(8, "big")
        + b"\x00"
        + b"\x00\x01"
        + b"\x00"
        + b"\x00"  # no tagged fields (delivery complete count unknown)
    )
    assert value == expected
    update_key = encode_state_key(ShareStateKey("g", TOPIC, 3, snapshot=False))
    assert update_key[:2] == b"\x00\x01"


def test_unknown_record_types_are_skipped_and_bad_bytes_refused() -> None:
    """A key type other than 0 and 1 is not the share coordinator's; truncated or future records raise."""
    assert decode_state_record(b"\x00\x05whatever", b"") is None
    key = encode_state_key(ShareStateKey("g", TOPIC, 3))
    with pytest.raises(RecordDecodeError):
        decode_state_record(key[:-1], None)
    with pytest.raises(UnsupportedRecordVersionError):
        decode_state_record(key, b"\x00\x01")
    with pytest.raises(RecordDecodeError):
        decode_state_record(b"\x00", None)


def test_a_share_partition_lives_where_kafka_puts_it() -> None:
    """The state partition is ``abs(hashCode("group:topicIdBase64:partition")) % partitions``."""
    key = ShareStateKey("orders", TOPIC, 7)
    text = key.coordinator_key
    assert text == f"orders:{topic_id_text(TOPIC)}:7"
    assert topic_id_text(TOPIC) == "a6e4EJ2tEdGAtADAT9QwyA"
    assert state_partition_for(text, 50) == abs(java_string_hash(text)) % 50
