"""Offset commit records laid out straight into an offsets-log batch: the commit path's encoder.

Nearly every batch the group coordinator appends holds OffsetCommit records only, most often one.
The general way encodes each key and value on its own (:mod:`kcoord.coordinator.record_codec`) and
then lays the byte pairs out as records (:func:`~kcoord.protocol.plain_batch.encode_for_log`); here
each record's parts (length, attributes, deltas, key, value) are packed in one pass, the value's
fixed fields in one ``struct`` call either side of the metadata, the key with its length prefix
kept from the group's earlier commits.

The bytes are the general way's, byte for byte: an OffsetCommitValue v3, or v1 when an expiry is
set (what Kafka writes), behind an OffsetCommitKey of type 1.
``tests/coordinator/test_offset_commit_batch.py`` checks that with hypothesis over any keys,
values and batch sizes. A batch with any other record, or with a field that does not fit its
width, gets None: the caller then takes the general way, which raises the error that names the
field.

Record layout (Kafka's record v2; the timestamp delta is 0, there are no headers)::

    length varint | attributes 0 | timestamp delta 0 | offset delta varint
    | key length varint | key | value length varint | value | header count 0
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kcoord.coordinator.record_codec import encode_key
from kcoord.coordinator.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue
from kcoord.protocol.plain_batch import SMALL_VARINTS, EncodedBatch, batch_for_log, signed_varint

__all__ = ["OffsetCommitBatches"]

_V3_HEAD = struct.Struct(">hqih")
"""OffsetCommitValue v3 up to its metadata: version, offset, leader epoch, metadata length."""
_V3_TAIL = struct.Struct(">q")
"""... and after it: the commit timestamp."""
_V3_FIXED = _V3_HEAD.size + _V3_TAIL.size
_V1_HEAD = struct.Struct(">hqh")
"""OffsetCommitValue v1 up to its metadata: version, offset, metadata length."""
_V1_TAIL = struct.Struct(">qq")
"""... and after it: the commit and expire timestamps."""
_V1_FIXED = _V1_HEAD.size + _V1_TAIL.size
_NO_EXPIRY = -1
_SMALL = len(SMALL_VARINTS)
_ATTRIBUTES_AND_TIMESTAMP_DELTA = b"\x00\x00"
_NO_HEADERS = b"\x00"
_KEPT_KEYS = 1 << 16


class OffsetCommitBatches:
    """Encodes batches of offset commits; keeps the encoded keys (with their length prefix) of the
    partitions committed lately, the oldest dropped first: a group commits the same ones again and
    again. Keys are kept by ``(group, topic, partition)``: a tuple hashes and compares in C."""

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str, int], bytes] = {}

    def encode(self, records: Sequence[CoordinatorRecord], now_ms: int) -> EncodedBatch | None:
        """The batch of ``records`` at ``now_ms``, as the general way builds it; None when one of them
        is not an offset commit, or a field does not fit (the general way then explains)."""
        parts: list[bytes] = []
        small = SMALL_VARINTS
        keys = self._keys
        for delta, record in enumerate(records):
            key = record.key
            value = record.value
            if type(key) is not OffsetCommitKey or type(value) is not OffsetCommitValue:
                return None
            fields = (key.group, key.topic, key.partition)
            key_part = keys.get(fields)
            if key_part is None:
                key_part = self._keep(fields, key)
            metadata = value.metadata.encode("utf-8")
            metadata_size = len(metadata)
            try:
                if value.expire_timestamp == _NO_EXPIRY:
                    head = _V3_HEAD.pack(3, value.offset, value.leader_epoch, metadata_size)
                    tail = _V3_TAIL.pack(value.commit_timestamp)
                    value_size = _V3_FIXED + metadata_size
                else:
                    head = _V1_HEAD.pack(1, value.offset, metadata_size)
                    tail = _V1_TAIL.pack(value.commit_timestamp, value.expire_timestamp)
                    value_size = _V1_FIXED + metadata_size
            except struct.error:
                return None
            delta_part = small[delta] if delta < _SMALL else signed_varint(delta)
            value_length = small[value_size] if value_size < _SMALL else signed_varint(value_size)
            # attributes, timestamp delta and header count: one byte each
            size = 3 + len(delta_part) + len(key_part) + len(value_length) + value_size
            parts += (
                small[size] if size < _SMALL else signed_varint(size),
                _ATTRIBUTES_AND_TIMESTAMP_DELTA,
                delta_part,
                key_part,
                value_length,
                head,
                metadata,
                tail,
                _NO_HEADERS,
            )
        return batch_for_log(b"".join(parts), len(records), now_ms)

    def _keep(self, fields: tuple[str, str, int], key: OffsetCommitKey) -> bytes:
        """The key's bytes behind their length, kept (RecordEncodeError for a key that does not fit)."""
        encoded = encode_key(key)
        size = len(encoded)
        keys = self._keys
        if len(keys) >= _KEPT_KEYS:
            del keys[next(iter(keys))]
        part = keys[fields] = (SMALL_VARINTS[size] if size < _SMALL else signed_varint(size)) + encoded
        return part
