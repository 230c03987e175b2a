"""Transaction markers as the log holds them: control batches and the transactional attribute.

A transaction ends with one *control batch* on every partition it wrote to (Kafka's
``EndTransactionMarker``): a batch with the transactional and control attributes, the
producer's id and epoch, and one record whose key is ``(version int16 = 0, type int16)`` — type
0 aborts, 1 commits — and whose value is ``(version int16 = 0, coordinator epoch int32)``.
Readers (the consumer, the coordinators' loaders, the last-stable-offset tracking) look at the
header's attributes and the record's key; nothing else of the batch carries meaning.

The transaction coordinator writes markers to data partitions and to ``__consumer_offsets``
(for TxnOffsetCommit); the group coordinator writes its transactional offset commits as
transactional batches of the producer. Both build their batches here.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kcoord.protocol.plain_batch import EncodedBatch, encode_for_log

__all__ = [
    "ABORT_MARKER",
    "COMMIT_MARKER",
    "CONTROL_ATTRIBUTE",
    "CONTROL_ATTRIBUTES",
    "TRANSACTIONAL_ATTRIBUTE",
    "ControlRecord",
    "encode_marker_batch",
    "encode_transactional_batch",
    "read_control_record",
]

TRANSACTIONAL_ATTRIBUTE = 0x10
"""Attribute bit 4: the batch belongs to a transaction of its producer."""
CONTROL_ATTRIBUTE = 0x20
"""Attribute bit 5: the batch holds control records (markers), not data."""
CONTROL_ATTRIBUTES = TRANSACTIONAL_ATTRIBUTE | CONTROL_ATTRIBUTE
"""A transaction marker's batch is both transactional and control."""

ABORT_MARKER = 0
COMMIT_MARKER = 1
_CONTROL_RECORD_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecord(NamedTuple):
    """One control record: whether it commits, and the coordinator epoch that wrote it (-1 unknown)."""

    committed: bool
    coordinator_epoch: int


def encode_marker_batch(
    producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int, timestamp_ms: int
) -> EncodedBatch:
    """The control batch that commits (or aborts) ``producer_id``'s transaction on one partition."""
    key = _KEY.pack(_CONTROL_RECORD_VERSION, COMMIT_MARKER if committed else ABORT_MARKER)
    value = _VALUE.pack(_CONTROL_RECORD_VERSION, coordinator_epoch)
    return encode_for_log(
        [(key, value)],
        timestamp_ms,
        attributes=CONTROL_ATTRIBUTES,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


def encode_transactional_batch(
    entries: list[tuple[bytes | None, bytes | None]], producer_id: int, producer_epoch: int, timestamp_ms: int
) -> EncodedBatch:
    """Records of ``producer_id``'s transaction: hidden from committed readers until its marker."""
    return encode_for_log(
        entries,
        timestamp_ms,
        attributes=TRANSACTIONAL_ATTRIBUTE,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


def read_control_record(key: bytes | None, value: bytes | None) -> ControlRecord | None:
    """The marker a control record holds, or None for a record type this version does not know.

    Kafka skips unknown control types (a newer broker may write them); so does every reader here.
    A key shorter than four bytes is not a control record at all and reads as None too."""
    if key is None or len(key) < _KEY.size:
        return None
    _version, kind = _KEY.unpack_from(key)
    if kind not in (ABORT_MARKER, COMMIT_MARKER):
        return None
    epoch = -1
    if value is not None and len(value) >= _VALUE.size:
        epoch = _VALUE.unpack_from(value)[1]
    return ControlRecord(kind == COMMIT_MARKER, epoch)
