"""Share group records of the offsets log: Kafka's key types 10-15, round trips and unknown types."""

from __future__ import annotations

import uuid

import pytest

from kcoord.coordinator.record_io import UnsupportedRecordVersionError
from kcoord.coordinator.share.group_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupRecord,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    decode_share_group_record,
    encode_share_group_key,
    encode_share_group_value,
)

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
RECORDS = [
    ShareGroupRecord(
        ShareGroupMemberMetadataKey("g", "m"), ShareGroupMemberMetadataValue("r1", "c", "/h", ("a", "b"))
    ),
    ShareGroupRecord(ShareGroupMemberMetadataKey("g", "m"), ShareGroupMemberMetadataValue(None, "", "", ())),
    ShareGroupRecord(ShareGroupMetadataKey("g"), ShareGroupMetadataValue(7, -(2**63))),
    ShareGroupRecord(ShareGroupTargetAssignmentMetadataKey("g"), ShareGroupTargetAssignmentMetadataValue(7)),
    ShareGroupRecord(
        ShareGroupTargetAssignmentMemberKey("g", "m"),
        ShareGroupTargetAssignmentMemberValue(((T1, (0, 2)), (T2, ()))),
    ),
    ShareGroupRecord(
        ShareGroupCurrentMemberAssignmentKey("g", "m"),
        ShareGroupCurrentMemberAssignmentValue(7, 6, 0, ((T1, (1,)),)),
    ),
    ShareGroupRecord(
        ShareGroupStatePartitionMetadataKey("g"),
        ShareGroupStatePartitionMetadataValue(((T2, "b", (3,), 9),), ((T1, "a", (0, 1), 5),), ((T2, "b"),)),
    ),
    ShareGroupRecord(ShareGroupCurrentMemberAssignmentKey("g", "m"), None),
]


@pytest.mark.parametrize("record", RECORDS)
def test_every_share_group_record_survives_a_round_trip(record: ShareGroupRecord) -> None:
    """Each key type 10-15 and a tombstone decode to what was encoded."""
    encoded = encode_share_group_key(record.key), encode_share_group_value(record.value)
    assert decode_share_group_record(*encoded) == record


def test_share_group_keys_carry_kafkas_record_types() -> None:
    """The key starts with Kafka's record type: 10 member metadata, 11 group metadata ... 15 state."""
    types = [int.from_bytes(encode_share_group_key(r.key)[:2], "big") for r in RECORDS]
    assert types == [10, 10, 11, 12, 13, 14, 15, 14]
    metadata = encode_share_group_value(ShareGroupMetadataValue(7, 1))
    assert metadata == b"\x00\x00" + b"\x00\x00\x00\x07" + (1).to_bytes(8, "big") + b"\x00"


def test_other_record_types_are_not_share_group_records_and_future_versions_are_refused() -> None:
    """Offset commits (1), consumer groups (3-8) and the retired key 9 are left to others; value v1 raises."""
    for record_type in (1, 3, 8, 9, 16):
        assert decode_share_group_record(record_type.to_bytes(2, "big") + b"\x00\x01g", b"") is None
    with pytest.raises(UnsupportedRecordVersionError):
        decode_share_group_record(encode_share_group_key(ShareGroupMetadataKey("g")), b"\x00\x01" + bytes(13))
