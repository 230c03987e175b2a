"""Codec tests for __consumer_offsets records: golden bytes, every readable version, malformed input."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.coordinator.record_codec import (
    RecordDecodeError,
    RecordEncodeError,
    UnsupportedRecordVersionError,
    decode_record,
    encode_key,
    encode_value,
)
from kcoord.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kcoord.coordinator.share.group_records import (
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupRecord,
)

TS = 1_700_000_000_000
TS_HEX = "0000018bcfe56800"

OFFSET_KEY = OffsetCommitKey(group="g1", topic="t", partition=3)
OFFSET_KEY_HEX = "0001" + "0002" + "6731" + "0001" + "74" + "00000003"

OFFSET_VALUE = OffsetCommitValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=TS)
OFFSET_VALUE_V3_HEX = "0003" + "000000000000002a" + "00000005" + "0001" + "6d" + TS_HEX

GROUP_KEY = GroupMetadataKey(group="g1")
GROUP_KEY_HEX = "0002" + "0002" + "6731"

MEMBER = MemberMetadata(
    member_id="m1",
    group_instance_id=None,
    client_id="c",
    client_host="/127.0.0.1",
    rebalance_timeout=300_000,
    session_timeout=45_000,
    subscription=b"\x00\x01",
    assignment=b"",
)
GROUP_VALUE = GroupMetadataValue(
    protocol_type="consumer",
    generation=7,
    protocol="range",
    leader="m1",
    current_state_timestamp=TS,
    members=(MEMBER,),
)
GROUP_VALUE_V3_HEX = (
    "0003"
    + "0008"
    + b"consumer".hex()
    + "00000007"
    + "0005"
    + b"range".hex()
    + "0002"
    + "6d31"
    + TS_HEX
    + "00000001"
    + "0002"
    + "6d31"
    + "ffff"
    + "0001"
    + "63"
    + "000a"
    + b"/127.0.0.1".hex()
    + "000493e0"
    + "0000afc8"
    + "00000002"
    + "0001"
    + "00000000"
)
# v4 is flexible: compact lengths (n + 1 as an unsigned varint) and a tagged-field count per struct.
GROUP_VALUE_V4_HEX = (
    "0004"
    + "09"
    + b"consumer".hex()
    + "00000007"
    + "06"
    + b"range".hex()
    + "03"
    + "6d31"
    + TS_HEX
    + "02"
    + "03"
    + "6d31"
    + "00"
    + "02"
    + "63"
    + "0b"
    + b"/127.0.0.1".hex()
    + "000493e0"
    + "0000afc8"
    + "03"
    + "0001"
    + "01"
    + "00"
    + "00"
)


def test_offset_commit_golden_bytes() -> None:
    """An OffsetCommit key (type 1) and v3 value encode to the bytes Kafka's schemas specify."""
    assert encode_key(OFFSET_KEY).hex() == OFFSET_KEY_HEX
    assert encode_value(OFFSET_VALUE) == bytes.fromhex(OFFSET_VALUE_V3_HEX)
    record = decode_record(bytes.fromhex(OFFSET_KEY_HEX), bytes.fromhex(OFFSET_VALUE_V3_HEX))
    assert record == CoordinatorRecord(key=OFFSET_KEY, value=OFFSET_VALUE)


def test_group_metadata_golden_bytes() -> None:
    """A GroupMetadata key (type 2) and v3 value encode to the bytes Kafka's schemas specify."""
    assert encode_key(GROUP_KEY).hex() == GROUP_KEY_HEX
    assert encode_value(GROUP_VALUE) == bytes.fromhex(GROUP_VALUE_V3_HEX)
    record = decode_record(bytes.fromhex(GROUP_KEY_HEX), bytes.fromhex(GROUP_VALUE_V3_HEX))
    assert record == CoordinatorRecord(key=GROUP_KEY, value=GROUP_VALUE)


def test_group_metadata_v4_flexible_golden_bytes() -> None:
    """The flexible v4 GroupMetadata value uses compact encodings and tagged-field counts."""
    assert encode_value(GROUP_VALUE, version=4) == bytes.fromhex(GROUP_VALUE_V4_HEX)
    record = decode_record(bytes.fromhex(GROUP_KEY_HEX), bytes.fromhex(GROUP_VALUE_V4_HEX))
    assert record is not None and record.value == GROUP_VALUE


def test_offset_commit_v4_skips_unknown_tagged_fields() -> None:
    """A flexible v4 OffsetCommit value with an unknown tagged field decodes, skipping the tag."""
    value_hex = "0004" + "000000000000002a" + "00000005" + "026d" + TS_HEX + "01" + "00" + "02" + "abcd"
    record = decode_record(bytes.fromhex(OFFSET_KEY_HEX), bytes.fromhex(value_hex))
    assert record is not None and record.value == OFFSET_VALUE


def test_offset_commit_older_versions_read_with_defaults() -> None:
    """v0 and v2 lack the epoch and expiry (read as -1); v1 carries the expiry but no epoch."""
    key = bytes.fromhex(OFFSET_KEY_HEX)
    body = "000000000000002a" + "0001" + "6d" + TS_HEX
    expected = OffsetCommitValue(offset=42, leader_epoch=-1, metadata="m", commit_timestamp=TS)
    for version in ("0000", "0002"):
        record = decode_record(key, bytes.fromhex(version + body))
        assert record is not None and record.value == expected
    v1 = decode_record(key, bytes.fromhex("0001" + body + "0000018bcfe56801"))
    assert v1 is not None and v1.value == dataclasses.replace(expected, expire_timestamp=TS + 1)


def test_expiry_is_written_as_v1() -> None:
    """A value with an expire timestamp is written as v1 (the only version that has one)."""
    value = dataclasses.replace(OFFSET_VALUE, expire_timestamp=TS + 1)
    encoded = encode_value(value)
    assert encoded is not None and encoded[:2] == b"\x00\x01"
    record = decode_record(encode_key(OFFSET_KEY), encoded)
    assert record is not None and record.value == dataclasses.replace(value, leader_epoch=-1)


def test_legacy_offset_key_type_zero_is_read() -> None:
    """A type-0 key decodes as an OffsetCommit key (and is re-encoded as type 1)."""
    record = decode_record(bytes.fromhex("0000" + OFFSET_KEY_HEX[4:]), None)
    assert record == CoordinatorRecord(key=OFFSET_KEY, value=None)


def test_group_metadata_v0_uses_session_timeout_as_rebalance_timeout() -> None:
    """v0 has no rebalance timeout, instance id or state time; they read as session timeout, None, -1."""
    record = decode_record(encode_key(GROUP_KEY), encode_value(GROUP_VALUE, version=0))
    assert record is not None
    assert record.value == dataclasses.replace(
        GROUP_VALUE,
        current_state_timestamp=-1,
        members=(dataclasses.replace(MEMBER, rebalance_timeout=45_000),),
    )


def test_tombstones_round_trip() -> None:
    """A None value stays None and decodes to a tombstone record."""
    assert encode_value(None) is None
    assert decode_record(encode_key(GROUP_KEY), None) == CoordinatorRecord(key=GROUP_KEY, value=None)


@pytest.mark.parametrize("record_type", [9, 16, 17, 100])
def test_unknown_record_types_are_skipped(record_type: int) -> None:
    """Key 9 (no longer written) and streams group records decode to None, with or without a value."""
    key = record_type.to_bytes(2, "big") + b"\x00\x02g1"
    assert decode_record(key, b"\x00\x00\x01") is None
    assert decode_record(key, None) is None


def test_share_group_records_round_trip_through_the_offsets_codec() -> None:
    """Share group records (key types 10-15) are written and read back by the offsets log's codec."""
    key = ShareGroupMetadataKey("sg")
    value = ShareGroupMetadataValue(3, -42)
    assert decode_record(encode_key(key), encode_value(value)) == ShareGroupRecord(key, value)
    assert decode_record(encode_key(key), None) == ShareGroupRecord(key, None)


@pytest.mark.parametrize(
    ("key_hex", "value_hex", "message"),
    [
        ("00", None, "record type"),
        ("ffff0001", None, "negative record type"),
        ("00020005" + "6731", None, "group"),
        ("0002ffff", None, "null but not nullable"),
        ("0002" + "0002" + "ff31", None, "UTF-8"),
        (GROUP_KEY_HEX + "00", None, "trailing"),
        (OFFSET_KEY_HEX, "", "version"),
        (OFFSET_KEY_HEX, OFFSET_VALUE_V3_HEX + "00", "trailing"),
        (GROUP_KEY_HEX, GROUP_VALUE_V3_HEX[:-20] + "ffffffff" + "00000000", "invalid length"),
        (
            GROUP_KEY_HEX,
            "0003" + "0001" + "63" + "00000001" + "ffff" + "ffff" + TS_HEX + "7fffffff",
            "claims",
        ),
        (GROUP_KEY_HEX, "0004" + "ffffffffff01", "longer than 5 bytes"),
        (GROUP_KEY_HEX, "0004" + "00", "null but not nullable"),
    ],
)
def test_malformed_records_raise_a_clear_error(key_hex: str, value_hex: str | None, message: str) -> None:
    """Truncated, oversized, null, non-UTF-8 or trailing input raises RecordDecodeError naming the problem."""
    value = None if value_hex is None else bytes.fromhex(value_hex)
    with pytest.raises(RecordDecodeError, match=message):
        decode_record(bytes.fromhex(key_hex), value)


def test_every_truncation_is_rejected() -> None:
    """Cutting a valid record anywhere raises RecordDecodeError, never another exception."""
    cases = [
        (OFFSET_KEY_HEX, OFFSET_VALUE_V3_HEX),
        (GROUP_KEY_HEX, GROUP_VALUE_V3_HEX),
        (GROUP_KEY_HEX, GROUP_VALUE_V4_HEX),
    ]
    for key_hex, value_hex in cases:
        key, value = bytes.fromhex(key_hex), bytes.fromhex(value_hex)
        for cut in range(len(key)):
            with pytest.raises(RecordDecodeError):
                decode_record(key[:cut], value)
        for cut in range(len(value)):
            with pytest.raises(RecordDecodeError):
                decode_record(key, value[:cut])


@pytest.mark.parametrize("version", [5, 7, -1])
def test_unsupported_value_versions(version: int) -> None:
    """A value version beyond v4 raises UnsupportedRecordVersionError (a RecordDecodeError)."""
    value = version.to_bytes(2, "big", signed=True) + bytes.fromhex(OFFSET_VALUE_V3_HEX)[2:]
    with pytest.raises(UnsupportedRecordVersionError):
        decode_record(bytes.fromhex(OFFSET_KEY_HEX), value)
    with pytest.raises(UnsupportedRecordVersionError):
        decode_record(bytes.fromhex(GROUP_KEY_HEX), value)


def test_values_that_do_not_fit_are_refused() -> None:
    """Out-of-range integers and over-long strings raise RecordEncodeError (a ValueError)."""
    with pytest.raises(RecordEncodeError, match="partition"):
        encode_key(OffsetCommitKey(group="g", topic="t", partition=1 << 31))
    with pytest.raises(RecordEncodeError, match="32767"):
        encode_key(GroupMetadataKey(group="x" * 40_000))
    with pytest.raises(RecordEncodeError, match="32767"):
        encode_value(dataclasses.replace(OFFSET_VALUE, metadata="é" * 20_000), version=4)
    with pytest.raises(RecordEncodeError, match="version"):
        encode_value(OFFSET_VALUE, version=5)


# --------------------------------------------------------------------------- hypothesis

_text = st.text(max_size=40)
_i32 = st.integers(-(1 << 31), (1 << 31) - 1)
_i64 = st.integers(-(1 << 63), (1 << 63) - 1)

_offset_keys = st.builds(OffsetCommitKey, group=_text, topic=_text, partition=_i32)
_group_keys = st.builds(GroupMetadataKey, group=_text)
_offset_values = st.builds(
    OffsetCommitValue,
    offset=_i64,
    leader_epoch=_i32,
    metadata=_text,
    commit_timestamp=_i64,
    expire_timestamp=st.one_of(st.just(-1), _i64),
)
_members = st.builds(
    MemberMetadata,
    member_id=_text,
    group_instance_id=st.none() | _text,
    client_id=_text,
    client_host=_text,
    rebalance_timeout=_i32,
    session_timeout=_i32,
    subscription=st.binary(max_size=64),
    assignment=st.binary(max_size=64),
)
_group_values = st.builds(
    GroupMetadataValue,
    protocol_type=_text,
    generation=_i32,
    protocol=st.none() | _text,
    leader=st.none() | _text,
    current_state_timestamp=_i64,
    members=st.lists(_members, max_size=4).map(tuple),
)


def _as_offset_version(value: OffsetCommitValue, version: int) -> OffsetCommitValue:
    """What survives writing ``value`` as ``version``."""
    epoch = value.leader_epoch if version >= 3 else -1
    expiry = value.expire_timestamp if version == 1 else -1
    return dataclasses.replace(value, leader_epoch=epoch, expire_timestamp=expiry)


def _as_group_version(value: GroupMetadataValue, version: int) -> GroupMetadataValue:
    """What survives writing ``value`` as ``version``."""
    members = tuple(
        dataclasses.replace(
            member,
            group_instance_id=member.group_instance_id if version >= 3 else None,
            rebalance_timeout=member.rebalance_timeout if version >= 1 else member.session_timeout,
        )
        for member in value.members
    )
    timestamp = value.current_state_timestamp if version >= 2 else -1
    return dataclasses.replace(value, current_state_timestamp=timestamp, members=members)


@given(key=_offset_keys, value=_offset_values)
def test_offset_commit_default_round_trip(key: OffsetCommitKey, value: OffsetCommitValue) -> None:
    """What kcoord writes for an offset commit reads back as the same record (v1 drops the epoch)."""
    record = decode_record(encode_key(key), encode_value(value))
    expected = _as_offset_version(value, 1 if value.expire_timestamp != -1 else 3)
    assert record == CoordinatorRecord(key=key, value=expected)


@given(key=_group_keys, value=_group_values)
def test_group_metadata_default_round_trip(key: GroupMetadataKey, value: GroupMetadataValue) -> None:
    """What kcoord writes for group metadata (v3) reads back unchanged."""
    assert decode_record(encode_key(key), encode_value(value)) == CoordinatorRecord(key=key, value=value)


@given(value=_offset_values, version=st.integers(0, 4))
def test_offset_commit_every_version_round_trip(value: OffsetCommitValue, version: int) -> None:
    """Every readable OffsetCommitValue version reads back the fields that version carries."""
    record = decode_record(encode_key(OFFSET_KEY), encode_value(value, version=version))
    assert record is not None and record.value == _as_offset_version(value, version)


@given(value=_group_values, version=st.integers(0, 4))
def test_group_metadata_every_version_round_trip(value: GroupMetadataValue, version: int) -> None:
    """Every readable GroupMetadataValue version reads back the fields that version carries."""
    record = decode_record(encode_key(GROUP_KEY), encode_value(value, version=version))
    assert record is not None and record.value == _as_group_version(value, version)


@given(key=st.binary(max_size=40), value=st.none() | st.binary(max_size=80))
def test_arbitrary_bytes_never_crash_differently(key: bytes, value: bytes | None) -> None:
    """Random bytes either raise RecordDecodeError or decode to a record whose key re-encodes exactly."""
    try:
        record = decode_record(key, value)
    except RecordDecodeError:
        return
    if record is not None and key[:2] != b"\x00\x00":
        assert encode_key(record.key) == key
