"""Codec tests for __transaction_state records: bytes built by hand from Kafka's schemas, round trips."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.coordinator.record_io import RecordDecodeError, UnsupportedRecordVersionError
from kcoord.coordinator.transactions.records import (
    TopicPartition,
    TransactionLogKey,
    TransactionLogValue,
    TransactionRecord,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
)
from kcoord.coordinator.transactions.serde import TransactionRecordSerde

ONGOING = TransactionLogValue(
    producer_id=4000,
    producer_epoch=3,
    timeout_ms=60_000,
    status=1,
    partitions=(TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 1)),
    last_update_ms=1_700_000_000_500,
    start_ms=1_700_000_000_000,
    previous_producer_id=3999,
)


def _v0_bytes() -> bytes:
    """TransactionLogValue v0 of ONGOING, field by field from the JSON schema (no tagged fields)."""
    return b"".join(
        [
            struct.pack(">h", 0),  # version
            struct.pack(">q", 4000),  # ProducerId
            struct.pack(">h", 3),  # ProducerEpoch
            struct.pack(">i", 60_000),  # TransactionTimeoutMs
            struct.pack(">b", 1),  # TransactionStatus: Ongoing
            struct.pack(">i", 2),  # TransactionPartitions: 2 topics
            struct.pack(">h", 1) + b"a" + struct.pack(">i", 2) + struct.pack(">ii", 0, 2),
            struct.pack(">h", 1) + b"b" + struct.pack(">i", 1) + struct.pack(">i", 1),
            struct.pack(">q", 1_700_000_000_500),  # TransactionLastUpdateTimestampMs
            struct.pack(">q", 1_700_000_000_000),  # TransactionStartTimestampMs
        ]
    )


def _v1_bytes() -> bytes:
    """Version 1: compact lengths (n + 1), a tagged-field section per struct, tag 0 previous producer id."""
    return b"".join(
        [
            struct.pack(">h", 1),
            struct.pack(">q", 4000),
            struct.pack(">h", 3),
            struct.pack(">i", 60_000),
            struct.pack(">b", 1),
            bytes([3]),  # compact array: 2 topics
            bytes([2]) + b"a" + bytes([3]) + struct.pack(">ii", 0, 2) + bytes([0]),
            bytes([2]) + b"b" + bytes([2]) + struct.pack(">i", 1) + bytes([0]),
            struct.pack(">q", 1_700_000_000_500),
            struct.pack(">q", 1_700_000_000_000),
            bytes([1, 0, 8]) + struct.pack(">q", 3999),  # 1 tagged field: tag 0, 8 bytes
        ]
    )


def test_key_is_record_type_zero_then_the_transactional_id() -> None:
    """The key is int16 0 and the id as an int16-length string, as Kafka's TransactionLogKey v0."""
    assert encode_key(TransactionLogKey("my-txn")) == b"\x00\x00\x00\x06my-txn"
    assert decode_record(b"\x00\x00\x00\x06my-txn", None) == TransactionRecord(
        TransactionLogKey("my-txn"), None
    )


def test_value_v0_matches_bytes_built_from_the_schema() -> None:
    """Version 0 encodes and decodes exactly the hand-built bytes (tagged fields fall back to defaults)."""
    v0 = dataclasses.replace(ONGOING, previous_producer_id=-1)
    assert encode_value(v0, version=0) == _v0_bytes()
    assert decode_value(_v0_bytes()) == v0


def test_value_v1_matches_bytes_built_from_the_schema() -> None:
    """Version 1 (what kcoord writes) carries the previous producer id as tag 0 and omits default tags."""
    assert encode_value(ONGOING) == _v1_bytes()
    assert decode_value(_v1_bytes()) == ONGOING


def test_empty_state_writes_null_partitions_in_both_versions() -> None:
    """Partitions are null for Empty: int32 -1 in v0, compact 0 in v1; they read back as None."""
    empty = TransactionLogValue(4000, 0, 60_000, 0, None, 5, -1)
    v0 = encode_value(empty, version=0)
    v1 = encode_value(empty)
    assert v0 is not None and v1 is not None
    assert v0[2 + 8 + 2 + 4 + 1 : 2 + 8 + 2 + 4 + 1 + 4] == struct.pack(">i", -1)
    assert v1[2 + 8 + 2 + 4 + 1] == 0
    assert decode_value(v0).partitions is None
    assert decode_value(v1).partitions is None


def test_next_producer_id_and_client_version_tags_and_unknown_tags() -> None:
    """Tags 1 and 2 round-trip; an unknown tag (a newer Kafka's field) is skipped."""
    value = TransactionLogValue(7, 1, 1000, 2, (), 9, 8, 6, 77, 2)
    encoded = encode_value(value)
    assert encoded is not None and decode_value(encoded) == value
    plain = encode_value(TransactionLogValue(7, 1, 1000, 2, (), 9, 8))
    assert plain is not None and plain[-1] == 0  # no tags
    with_unknown = plain[:-1] + bytes([1, 9, 2, 0xAB, 0xCD])
    assert decode_value(with_unknown) == TransactionLogValue(7, 1, 1000, 2, (), 9, 8)


def test_malformed_values_raise_decode_errors() -> None:
    """A value of unknown version or status, truncated, with trailing bytes or a bad tag size is refused."""
    good = _v1_bytes()
    with pytest.raises(UnsupportedRecordVersionError):
        decode_value(struct.pack(">h", 2) + good[2:])
    with pytest.raises(RecordDecodeError):
        decode_value(good[:-3])
    with pytest.raises(RecordDecodeError):
        decode_value(good + b"\x00")
    with pytest.raises(RecordDecodeError):
        decode_value(good[:-11] + bytes([1, 0, 4]) + struct.pack(">i", 1))
    with pytest.raises(RecordDecodeError, match="status 8"):
        decode_value(good[:16] + bytes([8]) + good[17:])


def test_other_key_types_decode_to_none() -> None:
    """A key of another record type is skipped by replay (decodes to None)."""
    assert decode_record(b"\x00\x01\x00\x01x", b"whatever") is None


def test_serde_batch_holds_keys_and_values() -> None:
    """The runtime serde writes one batch of the records and reads each back unchanged."""
    records = [
        TransactionRecord(TransactionLogKey("a"), ONGOING),
        TransactionRecord(TransactionLogKey("b"), None),
    ]
    serde = TransactionRecordSerde()
    batch = serde.encode_batch(records, 1_700_000_000_000)
    assert batch.last_offset_delta == 1
    assert serde.fast_replay(object()) is None
    for record in records:
        assert serde.decode(encode_key(record.key), encode_value(record.value)) == record


_ids = st.text(min_size=1, max_size=20)
_partitions = st.lists(st.builds(TopicPartition, _ids, st.integers(0, 2**31 - 1)), max_size=6)


@given(
    txn=_ids,
    producer_id=st.integers(0, 2**63 - 1),
    epoch=st.integers(-1, 2**15 - 1),
    status=st.integers(0, 7),
    partitions=_partitions,
    times=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**62)),
    tags=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**62), st.integers(0, 3)),
    version=st.sampled_from([0, 1]),
)
def test_round_trip(
    txn: str,
    producer_id: int,
    epoch: int,
    status: int,
    partitions: list[TopicPartition],
    times: tuple[int, int],
    tags: tuple[int, int, int],
    version: int,
) -> None:
    """Every record encodes and decodes to itself (v0 drops the tagged fields to their defaults)."""
    value = TransactionLogValue(
        producer_id,
        epoch,
        30_000,
        status,
        None if status == 0 else tuple(sorted(set(partitions))),
        times[0],
        times[1],
        *(tags if version == 1 else (-1, -1, 0)),
    )
    key_bytes = encode_key(TransactionLogKey(txn))
    assert decode_record(key_bytes, encode_value(value, version)) == TransactionRecord(
        TransactionLogKey(txn), value
    )
