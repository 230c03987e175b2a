"""The field groups several coordinator record schemas share: group keys and int tagged fields."""

from __future__ import annotations

import dataclasses

import pytest

from kcoord.coordinator.record_fields import (
    IntTag,
    read_group_key,
    read_int_tags,
    write_group_key,
    write_int_tags,
)
from kcoord.coordinator.record_io import RecordDecodeError, RecordReader, RecordWriter
from kcoord.coordinator.records import ConsumerGroupMetadataKey, ConsumerGroupTargetAssignmentMetadataKey
from kcoord.coordinator.share.group_records import ShareGroupCurrentMemberAssignmentKey, ShareGroupMetadataKey


def test_group_keys_of_different_record_types_stay_distinct() -> None:
    """Keys sharing the GroupKey fields are equal only within one record type, and stay frozen."""
    keys = {
        ConsumerGroupMetadataKey("g"),
        ConsumerGroupTargetAssignmentMetadataKey("g"),
        ShareGroupMetadataKey("g"),
        ConsumerGroupMetadataKey("g"),
    }
    assert len(keys) == 3
    assert repr(ShareGroupMetadataKey("g")) == "ShareGroupMetadataKey(group='g')"
    assert not hasattr(ShareGroupCurrentMemberAssignmentKey("g", "m"), "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ShareGroupMetadataKey("g").group = "h"  # type: ignore[misc]


def test_group_key_bytes_carry_the_member_only_for_member_keys() -> None:
    """A member key writes and reads its member id after the group id; a group key has none."""
    for key, record_type in (
        (ShareGroupCurrentMemberAssignmentKey("g", "m"), 14),
        (ShareGroupMetadataKey("g"), 11),
    ):
        writer = RecordWriter("key")
        write_group_key(writer, record_type, key)
        reader = RecordReader(writer.getvalue(), "key")
        assert reader.int16("type") == record_type
        assert read_group_key(reader, type(key)) == key
        reader.finish()


def test_int_tags_round_trip_and_refuse_a_payload_of_the_wrong_size() -> None:
    """An int tagged field is left out at its default, reads back as written, and a wrong size is refused."""
    tags = (IntTag(0, "number", RecordWriter.int64, RecordReader.int64, -1),)
    writer = RecordWriter("value", flexible=True)
    assert write_int_tags(writer, _Numbered(-1), tags) == {}
    payloads = write_int_tags(writer, _Numbered(-5), tags)
    reader = RecordReader(b"", "value")
    assert read_int_tags(reader, payloads, tags) == {"number": -5}
    assert read_int_tags(reader, {}, tags) == {"number": -1}
    with pytest.raises(RecordDecodeError):
        read_int_tags(reader, {0: payloads[0][:4]}, tags)
    with pytest.raises(RecordDecodeError):
        read_int_tags(reader, {0: payloads[0] + b"\x00"}, tags)


@dataclasses.dataclass
class _Numbered:
    number: int
