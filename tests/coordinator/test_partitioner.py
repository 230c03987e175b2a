"""Tests of Kafka's partitionFor: Java String.hashCode over UTF-16 and Utils.abs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.coordinator.partitioner import java_string_hash, partition_for


def _reference_hash(s: str) -> int:
    """Java's String.hashCode, written the slow obvious way."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@pytest.mark.parametrize(
    ("group_id", "partition"),
    [
        ("my-group", 12),
        ("consumer-group-1", 20),
        ("polygenelubricants", 0),
        ("grüppe-ä", 37),
        ("日本語グループ", 31),
        ("grüppe-😀", 14),
    ],
)
def test_partition_for_matches_kafka(group_id: str, partition: int) -> None:
    """Known group ids land on the same of 50 partitions as on a Kafka broker."""
    assert partition_for(group_id, 50) == partition


def test_java_hash_known_values() -> None:
    """Hashes match Java, including MIN_VALUE and a surrogate pair counted as two code units."""
    assert java_string_hash("my-group") == -1906497762
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("grüppe-😀") == -1039948164
    assert java_string_hash("") == 0


def test_min_value_hash_maps_to_partition_zero() -> None:
    """Utils.abs(Integer.MIN_VALUE) is 0, so such a group goes to partition 0 for any count."""
    assert [partition_for("polygenelubricants", n) for n in (1, 3, 7, 50, 51)] == [0] * 5


def test_partition_count_must_be_positive() -> None:
    """Zero partitions is a configuration error, not a ZeroDivisionError."""
    with pytest.raises(ValueError):
        partition_for("g", 0)


@given(st.text(max_size=300))
def test_fast_hash_matches_reference(group_id: str) -> None:
    """The vectorised hash equals the per-code-unit definition for any string."""
    assert java_string_hash(group_id) == _reference_hash(group_id)


@given(st.text(max_size=50), st.integers(1, 1000))
def test_partition_is_in_range(group_id: str, num_partitions: int) -> None:
    """The partition is always a valid index."""
    assert 0 <= partition_for(group_id, num_partitions) < num_partitions
