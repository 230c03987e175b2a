"""The commit path's batch encoder writes exactly the general codec's bytes, or declines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.offset_commit_batch import OffsetCommitBatches
from kcoord.coordinator.record_codec import RecordEncodeError, decode_record, encode_key, encode_value
from kcoord.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kcoord.protocol.plain_batch import EncodedBatch, encode_for_log, iter_plain_records

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_long_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=200, max_size=600)
"""Over 1,023 bytes at times: a record, key or value length past the looked-up varints."""
_i32 = st.integers(-(1 << 31), (1 << 31) - 1)
_i64 = st.integers(-(1 << 63), (1 << 63) - 1)

_keys = st.builds(OffsetCommitKey, group=_text | _long_text, topic=_text, partition=_i32)
_values = st.builds(
    OffsetCommitValue,
    offset=_i64,
    leader_epoch=_i32,
    metadata=_text | _long_text,
    commit_timestamp=_i64,
    expire_timestamp=st.one_of(st.just(-1), _i64),
)
"""Without an expiry the general codec writes value v3, with one v1: both are covered."""
_commits = st.lists(st.builds(CoordinatorRecord, key=_keys, value=_values), max_size=8)


def _general(records: list[CoordinatorRecord], now_ms: int) -> EncodedBatch:
    return encode_for_log([(encode_key(r.key), encode_value(r.value)) for r in records], now_ms)


@settings(max_examples=300, deadline=None)
@given(records=_commits, now_ms=_i64)
def test_batches_are_the_general_codecs_bytes(records: list[CoordinatorRecord], now_ms: int) -> None:
    """Any batch of offset commits (v3 and v1 values, any ids and metadata) is byte for byte the
    general codec's batch, with the same header facts, and twice in a row (the kept keys)."""
    encoder = OffsetCommitBatches()
    expected = _general(records, now_ms)
    assert encoder.encode(records, now_ms) == expected
    assert encoder.encode(records, now_ms) == expected


@settings(max_examples=100, deadline=None)
@given(records=_commits.filter(bool))
def test_batches_read_back_as_their_records(records: list[CoordinatorRecord]) -> None:
    """Each record of a batch reads back (v1 keeps no leader epoch, v3 no expiry) at its offset delta."""
    batch = OffsetCommitBatches().encode(records, 7)
    assert batch is not None
    read = [
        (offset, decode_record(key or b"", value)) for offset, key, value in iter_plain_records(batch.data)
    ]
    expected = []
    for delta, record in enumerate(records):
        value = record.value
        assert isinstance(value, OffsetCommitValue)
        if value.expire_timestamp != -1:
            value = OffsetCommitValue(
                value.offset, -1, value.metadata, value.commit_timestamp, value.expire_timestamp
            )
        expected.append((delta, CoordinatorRecord(record.key, value)))
    assert read == expected


def test_another_record_type_is_declined() -> None:
    """A batch holding a record other than an offset commit (or a tombstone) is left to the general way."""
    commit = CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, "", 5))
    group = CoordinatorRecord(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, None, None, 5, ()))
    tombstone = CoordinatorRecord(OffsetCommitKey("g", "t", 0), None)
    encoder = OffsetCommitBatches()
    assert encoder.encode([commit, group], 5) is None
    assert encoder.encode([tombstone], 5) is None
    assert encoder.encode([commit], 5) == _general([commit], 5)


@pytest.mark.parametrize(
    "value",
    [
        OffsetCommitValue(1 << 63, -1, "", 5),
        OffsetCommitValue(1, 1 << 31, "", 5),
        OffsetCommitValue(1, -1, "m" * 40_000, 5),
        OffsetCommitValue(1, -1, "", 5, 1 << 63),
    ],
    ids=["offset", "leader-epoch", "metadata", "expiry"],
)
def test_a_value_that_does_not_fit_is_declined(value: OffsetCommitValue) -> None:
    """A field too wide for its place gets None, so the general way raises the error that names it."""
    record = CoordinatorRecord(OffsetCommitKey("g", "t", 0), value)
    assert OffsetCommitBatches().encode([record], 5) is None
    with pytest.raises(RecordEncodeError):
        _general([record], 5)


def test_a_key_that_does_not_fit_raises_the_general_error() -> None:
    """A group id too long for a record string raises the general codec's error, naming the field."""
    record = CoordinatorRecord(OffsetCommitKey("g" * 40_000, "t", 0), OffsetCommitValue(1, -1, "", 5))
    with pytest.raises(RecordEncodeError, match="group"):
        OffsetCommitBatches().encode([record], 5)
