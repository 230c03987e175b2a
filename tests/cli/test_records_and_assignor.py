"""The CLI's record codec, key partitioner and range assignor, without a server."""

from __future__ import annotations

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kcoord.cli.group_member import range_assign
from kcoord.cli.records import ConsoleRecord, decode_fetched, encode_batch, murmur2, partition_for_key
from kcoord.protocol.record_batch import crc_matches, parse_header


@pytest.mark.parametrize("key", [b"", b"a", b"ab", b"abc", b"abcd", b"key-17", bytes(range(256))])
def test_murmur2_matches_kafka_pythons_port_of_javas(key: bytes) -> None:
    """Every tail length hashes as Kafka's Utils.murmur2 (kafka-python's port is the reference)."""
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF
    assert partition_for_key(key, 7) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % 7


def test_a_batch_round_trips_with_keys_nulls_headers_and_timestamps() -> None:
    """What encode_batch writes is a valid magic-2 batch, and decode_fetched reads it back from an offset."""
    records = [
        ConsoleRecord(b"v0", b"k0", (("h", b"x"), ("empty", None)), 1_000),
        ConsoleRecord(None, None, (), 1_250),
        ConsoleRecord(b"v2" * 200, b"", (), 999),
    ]
    batch = encode_batch(records)
    header = parse_header(batch)
    assert header.record_count == 3 and header.max_timestamp == 1_250 and crc_matches(batch, 0, header)
    decoded = decode_fetched(batch, 4, 0)
    assert [(r.offset, r.partition, r.key, r.value, r.headers, r.timestamp_ms) for r in decoded] == [
        (i, 4, r.key, r.value, r.headers, r.timestamp_ms) for i, r in enumerate(records)
    ]
    assert [r.offset for r in decode_fetched(batch, 4, 2)] == [2]


def test_range_assignor_gives_the_first_members_one_more() -> None:
    """As Kafka's RangeAssignor: per topic, members in id order take contiguous ranges."""
    assigned = range_assign({"b": ("t", "u"), "a": ("t",), "c": ("t",)}, {"t": 5, "u": 2})
    assert assigned == {
        "a": [("t", 0), ("t", 1)],
        "b": [("t", 2), ("t", 3), ("u", 0), ("u", 1)],
        "c": [("t", 4)],
    }
