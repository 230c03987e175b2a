"""The load's fast decoding of offset commits agrees with the general reader and leaves it the rest."""

from __future__ import annotations

import pytest

from kcoord.coordinator.record_codec import (
    RecordDecodeError,
    RecordEncodeError,
    _encode_offset_commit_value,
    decode_key,
    decode_offset_commit_fields,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
)
from kcoord.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
)

COMMIT = CoordinatorRecord(
    OffsetCommitKey("grüppe", "orders", 7), OffsetCommitValue(42, 3, "meta ✓", 1_700_000_000_000)
)


def test_a_v3_commit_and_a_tombstone_decode_the_same_both_ways() -> None:
    """The fields of the fast path are the general reader's record, for a value and for a tombstone."""
    key, value = encode_key(COMMIT.key), encode_value(COMMIT.value)
    assert value is not None
    assert decode_offset_commit_fields(key, value) == (
        "grüppe",
        "orders",
        7,
        (42, 3, "meta ✓", 1_700_000_000_000),
    )
    assert decode_record(key, value) == COMMIT
    assert decode_key(key) == COMMIT.key and decode_value(COMMIT.key, value) == COMMIT.value
    assert decode_offset_commit_fields(key, None) == ("grüppe", "orders", 7, None)
    assert decode_record(key, None) == CoordinatorRecord(COMMIT.key, None)


def test_other_shapes_take_the_general_way() -> None:
    """Other value versions, group metadata keys and malformed bytes are left to the general reader."""
    key = encode_key(COMMIT.key)
    with_expiry = encode_value(OffsetCommitValue(1, -1, "", 5, expire_timestamp=9))
    assert with_expiry is not None
    assert decode_offset_commit_fields(key, with_expiry) is None
    assert decode_record(key, with_expiry) == CoordinatorRecord(
        COMMIT.key, OffsetCommitValue(1, -1, "", 5, expire_timestamp=9)
    )
    assert decode_offset_commit_fields(encode_key(GroupMetadataKey("g")), None) is None
    assert decode_offset_commit_fields(key[:-1], None) is None
    with pytest.raises(RecordDecodeError):
        decode_record(key[:-1], None)


@pytest.mark.parametrize(
    "value",
    [
        OffsetCommitValue(42, -1, "", 1_700_000_000_000),
        OffsetCommitValue(2**63 - 1, 2**31 - 1, "m\u00e9ta-\u03b1" * 50, -1),
        OffsetCommitValue(-1, 0, "x" * 32767, 0),
    ],
)
def test_offset_commit_value_fast_encoding_matches_the_general_writer(value: OffsetCommitValue) -> None:
    """The v3 fast path writes exactly what the general writer does, and reads back as the same value."""
    assert encode_value(value) == _encode_offset_commit_value(value, 3)
    assert decode_value(OffsetCommitKey("g", "t", 0), encode_value(value)) == value


def test_offset_commit_value_fast_encoding_refuses_what_does_not_fit() -> None:
    """Metadata longer than a 16-bit length or an offset past 64 bits fail as in the general writer."""
    with pytest.raises(RecordEncodeError, match="metadata"):
        encode_value(OffsetCommitValue(1, 0, "x" * 32768, 0))
    with pytest.raises(RecordEncodeError, match="offset"):
        encode_value(OffsetCommitValue(2**63, 0, "", 0))
