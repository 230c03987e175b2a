"""Kafka's byte layout for ``__consumer_offsets`` records (keys and values).

A key starts with an int16 *record type*, a value with an int16 *version*; a null value is a
tombstone. The layouts follow Apache Kafka's coordinator message schemas:

==========================  ===========================================================
key type 0 / 1              OffsetCommitKey: group, topic, partition i32 (written as 1)
key type 2                  GroupMetadataKey: group
OffsetCommitValue v0..v4    offset i64, leaderEpoch i32 (v3+), metadata,
                            commitTimestamp i64, expireTimestamp i64 (v1 only);
                            v4 is flexible. Written as v3, or v1 when an expiry is set.
GroupMetadataValue v0..v4   protocolType, generation i32, protocol?, leader?,
                            currentStateTimestamp i64 (v2+), members[memberId,
                            groupInstanceId? (v3+), clientId, clientHost,
                            rebalanceTimeout i32 (v1+), sessionTimeout i32,
                            subscription bytes, assignment bytes]; v4 is flexible.
                            Written as v3.
==========================  ===========================================================

Keys are never flexible. Flexible values use compact (unsigned-varint, length + 1) strings,
bytes and arrays, and end every struct with tagged fields, which are skipped when read. KIP-848
consumer group records (key types 3-8) are laid out by
:mod:`kcoord.coordinator.consumer_record_codec`, share group records (key types 10-15) by
:mod:`kcoord.coordinator.share.group_records`. Other key types (streams groups)
decode to None so replay can skip them. Anything malformed raises :class:`RecordDecodeError`
naming the field and offset.
"""

from __future__ import annotations

import struct

from kcoord.coordinator import consumer_record_codec
from kcoord.coordinator.record_fields import read_value_version
from kcoord.coordinator.record_io import (
    MAX_RECORD_STRING_BYTES,
    RecordDecodeError,
    RecordEncodeError,
    UnsupportedRecordVersionError,
    fits_record_string,
)
from kcoord.coordinator.record_io import RecordReader as _Reader
from kcoord.coordinator.record_io import RecordWriter as _Writer
from kcoord.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordKey,
    RecordValue,
)
from kcoord.coordinator.share.group_records import (
    ShareGroupKey,
    ShareGroupRecord,
    ShareGroupValue,
    decode_share_group_record,
    encode_share_group_key,
    encode_share_group_value,
)

__all__ = [
    "MAX_RECORD_STRING_BYTES",
    "RecordDecodeError",
    "RecordEncodeError",
    "UnsupportedRecordVersionError",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_value",
    "fits_record_string",
]


OFFSET_COMMIT_KEY_LEGACY = 0
OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2

OFFSET_COMMIT_VALUE_VERSIONS = range(5)
GROUP_METADATA_VALUE_VERSIONS = range(5)
_FLEXIBLE_FROM = 4
_OFFSET_COMMIT_WRITE_VERSION = 3
_OFFSET_COMMIT_WITH_EXPIRY_VERSION = 1
_GROUP_METADATA_WRITE_VERSION = 3

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_OFFSET_COMMIT_V3_HEAD = struct.Struct(">hqih")
"""OffsetCommitValue v3 up to its metadata: version, offset, leader epoch, metadata length."""


def decode_key(key: bytes) -> RecordKey | None:
    """Decode a key; None for a record type kcoord does not handle."""
    reader = _Reader(key, "record key")
    record_type = reader.int16("record type")
    if record_type in (OFFSET_COMMIT_KEY_LEGACY, OFFSET_COMMIT_KEY):
        decoded: RecordKey = OffsetCommitKey(
            group=reader.string("group", False),
            topic=reader.string("topic", False),
            partition=reader.int32("partition"),
        )
    elif record_type == GROUP_METADATA_KEY:
        decoded = GroupMetadataKey(group=reader.string("group", False))
    elif record_type in consumer_record_codec.KEY_TYPES.values():
        decoded = consumer_record_codec.decode_key(record_type, reader)
    elif record_type < 0:
        raise RecordDecodeError(f"record key: negative record type {record_type}")
    else:
        return None
    reader.finish()
    return decoded


def decode_value(key: RecordKey, value: bytes) -> RecordValue:
    """Decode the value that belongs to ``key``."""
    if isinstance(key, OffsetCommitKey):
        return _decode_offset_commit_value(value)
    if isinstance(key, consumer_record_codec.CONSUMER_KEY_CLASSES):
        return consumer_record_codec.decode_value(key, _Reader(value, type(key).__name__))
    return _decode_group_metadata_value(value)


_OFFSET_KEY_HEAD = struct.Struct(">hh")
_OFFSET_VALUE_V3_HEAD = struct.Struct(">hqih")


OffsetCommitFields = tuple[str, str, int, tuple[int, int, str, int] | None]
"""(group, topic, partition, (offset, leader epoch, metadata, commit timestamp) or None for a tombstone)."""


def decode_offset_commit_fields(key: bytes, value: bytes | None) -> OffsetCommitFields | None:
    """The common offset commit (key v0/v1, value v3 or a tombstone) in a few struct reads.

    Loading a partition decodes every record it holds, and the field-by-field reader (and the
    record objects) dominated a profile of it. None for anything else (another record type or
    version, a bad length, invalid UTF-8): :func:`decode_record` then takes the general way, which
    raises the precise error.
    """
    try:
        record_type, group_length = _OFFSET_KEY_HEAD.unpack_from(key)
        if record_type > OFFSET_COMMIT_KEY or record_type < 0 or group_length < 0:
            return None
        at = 4 + group_length
        (topic_length,) = _INT16.unpack_from(key, at)
        end = at + 2 + topic_length
        if topic_length < 0 or end + 4 != len(key):
            return None
        group = key[4:at].decode("utf-8")
        topic = key[at + 2 : end].decode("utf-8")
        (partition,) = _INT32.unpack_from(key, end)
        if value is None:
            return group, topic, partition, None
        version, offset, leader_epoch, metadata_length = _OFFSET_VALUE_V3_HEAD.unpack_from(value)
        at = 16 + metadata_length
        if version != 3 or metadata_length < 0 or at + 8 != len(value):
            return None
        fields = (offset, leader_epoch, value[16:at].decode("utf-8"), _INT64.unpack_from(value, at)[0])
    except (struct.error, UnicodeDecodeError):
        return None
    return group, topic, partition, fields


def decode_record(key: bytes, value: bytes | None) -> CoordinatorRecord | ShareGroupRecord | None:
    """Decode one offsets-log record; None for record types kcoord does not know."""
    fast = decode_offset_commit_fields(key, value)
    if fast is not None:
        group, topic, partition, fields = fast
        fast_key = OffsetCommitKey(group, topic, partition)
        return CoordinatorRecord(fast_key, None if fields is None else OffsetCommitValue(*fields))
    decoded_key = decode_key(key)
    if decoded_key is None:
        return decode_share_group_record(key, value)
    if value is None:
        return CoordinatorRecord(key=decoded_key, value=None)
    return CoordinatorRecord(key=decoded_key, value=decode_value(decoded_key, value))


def _read_value_version(reader: _Reader, versions: range) -> tuple[int, bool]:
    """A value's int16 version (one of ``versions``) and whether that version is flexible."""
    version = read_value_version(reader, versions, reader.what)
    return version, version >= _FLEXIBLE_FROM


def _end_struct(reader: _Reader, flexible: bool) -> None:
    """What ends a value's top-level struct: its tagged fields (flexible versions), then nothing."""
    if flexible:
        reader.skip_tagged_fields(reader.what)
    reader.finish()


def _decode_offset_commit_value(value: bytes) -> OffsetCommitValue:
    reader = _Reader(value, "OffsetCommitValue")
    version, flexible = _read_value_version(reader, OFFSET_COMMIT_VALUE_VERSIONS)
    decoded = OffsetCommitValue(
        offset=reader.int64("offset"),
        leader_epoch=reader.int32("leaderEpoch") if version >= 3 else -1,
        metadata=reader.string("metadata", flexible),
        commit_timestamp=reader.int64("commitTimestamp"),
        expire_timestamp=reader.int64("expireTimestamp") if version == 1 else -1,
    )
    _end_struct(reader, flexible)
    return decoded


def _decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    reader = _Reader(value, "GroupMetadataValue")
    version, flexible = _read_value_version(reader, GROUP_METADATA_VALUE_VERSIONS)
    decoded = GroupMetadataValue(
        protocol_type=reader.string("protocolType", flexible),
        generation=reader.int32("generation"),
        protocol=reader.nullable_string("protocol", flexible),
        leader=reader.nullable_string("leader", flexible),
        current_state_timestamp=reader.int64("currentStateTimestamp") if version >= 2 else -1,
        members=tuple(
            _decode_member(reader, version, flexible) for _ in range(reader.array_length("members", flexible))
        ),
    )
    _end_struct(reader, flexible)
    return decoded


def _decode_member(reader: _Reader, version: int, flexible: bool) -> MemberMetadata:
    member_id = reader.string("memberId", flexible)
    group_instance_id = reader.nullable_string("groupInstanceId", flexible) if version >= 3 else None
    client_id = reader.string("clientId", flexible)
    client_host = reader.string("clientHost", flexible)
    rebalance_timeout = reader.int32("rebalanceTimeout") if version >= 1 else None
    session_timeout = reader.int32("sessionTimeout")
    subscription = reader.bytes_("subscription", flexible)
    assignment = reader.bytes_("assignment", flexible)
    if flexible:
        reader.skip_tagged_fields("MemberMetadata")
    return MemberMetadata(
        member_id=member_id,
        group_instance_id=group_instance_id,
        client_id=client_id,
        client_host=client_host,
        # v0 predates the rebalance timeout; JoinGroup v0 used the session timeout for both.
        rebalance_timeout=session_timeout if rebalance_timeout is None else rebalance_timeout,
        session_timeout=session_timeout,
        subscription=subscription,
        assignment=assignment,
    )


def encode_key(key: RecordKey | ShareGroupKey) -> bytes:
    """Kafka's bytes for a record key (OffsetCommit keys are written as type 1)."""
    if isinstance(key, ShareGroupKey):
        return encode_share_group_key(key)
    if isinstance(key, OffsetCommitKey):
        writer = _Writer("OffsetCommitKey")
        writer.int16(OFFSET_COMMIT_KEY, "type")
        writer.string(key.group, "group")
        writer.string(key.topic, "topic")
        writer.int32(key.partition, "partition")
    elif isinstance(key, consumer_record_codec.CONSUMER_KEY_CLASSES):
        writer = _Writer(type(key).__name__)
        consumer_record_codec.encode_key(key, writer)
    else:
        writer = _Writer("GroupMetadataKey")
        writer.int16(GROUP_METADATA_KEY, "type")
        writer.string(key.group, "group")
    return writer.getvalue()


def encode_value(value: RecordValue | ShareGroupValue | None, *, version: int | None = None) -> bytes | None:
    """Kafka's bytes for a record value; None (a tombstone) stays None.

    Without ``version`` this writes what Kafka writes: OffsetCommitValue v3 (v1 when an expiry
    is set) and GroupMetadataValue v3. An explicit ``version`` (any readable one) exists for
    tests and tools; fields that version lacks are dropped, as Kafka drops ignorable fields.
    """
    if value is None:
        return None
    if isinstance(value, ShareGroupValue):
        return encode_share_group_value(value)
    if isinstance(value, OffsetCommitValue):
        if version is None:
            with_expiry = value.expire_timestamp != -1
            version = _OFFSET_COMMIT_WITH_EXPIRY_VERSION if with_expiry else _OFFSET_COMMIT_WRITE_VERSION
        if version == _OFFSET_COMMIT_WRITE_VERSION:
            return _encode_offset_commit_value_v3(value)
        return _encode_offset_commit_value(value, version)
    if not isinstance(value, GroupMetadataValue):
        writer = _Writer(type(value).__name__, flexible=True)
        consumer_record_codec.encode_value(value, writer)
        return writer.getvalue()
    return _encode_group_metadata_value(value, _GROUP_METADATA_WRITE_VERSION if version is None else version)


def _encode_offset_commit_value_v3(value: OffsetCommitValue) -> bytes:
    """The version every live commit writes, in two packs (the general writer's per-field calls cost
    more than the record); a value that does not fit goes to the general writer, which names the field."""
    metadata = value.metadata.encode("utf-8")
    try:
        head = _OFFSET_COMMIT_V3_HEAD.pack(3, value.offset, value.leader_epoch, len(metadata))
        return head + metadata + _INT64.pack(value.commit_timestamp)
    except struct.error:
        return _encode_offset_commit_value(value, 3)


def _value_writer(what: str, version: int, versions: range) -> _Writer:
    """A writer for a value at ``version`` (one of ``versions``), the int16 version already written."""
    if version not in versions:
        raise RecordEncodeError(f"{what} version {version} is not supported (0-4)")
    writer = _Writer(what, flexible=version >= _FLEXIBLE_FROM)
    writer.int16(version, "version")
    return writer


def _encode_offset_commit_value(value: OffsetCommitValue, version: int) -> bytes:
    writer = _value_writer("OffsetCommitValue", version, OFFSET_COMMIT_VALUE_VERSIONS)
    writer.int64(value.offset, "offset")
    if version >= 3:
        writer.int32(value.leader_epoch, "leader_epoch")
    writer.string(value.metadata, "metadata")
    writer.int64(value.commit_timestamp, "commit_timestamp")
    if version == 1:
        writer.int64(value.expire_timestamp, "expire_timestamp")
    writer.empty_tagged_fields()
    return writer.getvalue()


def _encode_group_metadata_value(value: GroupMetadataValue, version: int) -> bytes:
    writer = _value_writer("GroupMetadataValue", version, GROUP_METADATA_VALUE_VERSIONS)
    writer.string(value.protocol_type, "protocol_type")
    writer.int32(value.generation, "generation")
    writer.nullable_string(value.protocol, "protocol")
    writer.nullable_string(value.leader, "leader")
    if version >= 2:
        writer.int64(value.current_state_timestamp, "current_state_timestamp")
    writer.array_length(len(value.members), "members")
    for member in value.members:
        writer.string(member.member_id, "member_id")
        if version >= 3:
            writer.nullable_string(member.group_instance_id, "group_instance_id")
        writer.string(member.client_id, "client_id")
        writer.string(member.client_host, "client_host")
        if version >= 1:
            writer.int32(member.rebalance_timeout, "rebalance_timeout")
        writer.int32(member.session_timeout, "session_timeout")
        writer.bytes_(member.subscription, "subscription")
        writer.bytes_(member.assignment, "assignment")
        writer.empty_tagged_fields()
    writer.empty_tagged_fields()
    return writer.getvalue()
