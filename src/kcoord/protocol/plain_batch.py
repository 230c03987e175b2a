"""Uncompressed magic-2 record batches written and read without kio: the offsets log's hot paths.

The coordinator writes one small batch per group commit and reads every batch of its partitions
at start. kio's generic record writer and reader build an object per field (timestamps as
datetimes, offsets as phantom types), which a profile showed dominating both paths; here a batch
is built from ``(key, value)`` byte strings with struct and varints, and read back as ``(offset,
key, value)`` triples. Only what the coordinator writes is handled: no compression, no headers
needed (headers present are skipped), producer id -1. Anything else is left to kio by the caller.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import crc32c

from kcoord.protocol.record_batch import CRC_START, HEADER_SIZE, LOG_OVERHEAD, Compression, parse_header
from kcoord.protocol.varint import encode_uvarint

__all__ = [
    "SMALL_VARINTS",
    "CorruptBatchError",
    "EncodedBatch",
    "batch_for_log",
    "encode_for_log",
    "iter_plain_records",
    "signed_varint",
]

_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")
_PREFIX = struct.Struct(">qiib")
_CRC = struct.Struct(">I")


class CorruptBatchError(ValueError):
    """The bytes at a batch position are not a whole, intact, uncompressed batch."""


def signed_varint(value: int) -> bytes:
    """:func:`~kcoord.protocol.varint.encode_varint`, the one-byte case (most deltas and lengths) inline."""
    zigzag = (value << 1) ^ (value >> 63)
    if zigzag < 0x80:
        return bytes((zigzag,))
    return encode_uvarint(zigzag)


_SMALL = 1024
SMALL_VARINTS = tuple(encode_uvarint(n << 1) for n in range(_SMALL))
"""The varints of 0-1023 (one or two bytes each): deltas, key and value lengths and record sizes,
looked up rather than computed."""


class EncodedBatch(NamedTuple):
    """A batch this process just built, with the header facts a log needs to place it.

    The log takes these instead of parsing the header back out of bytes it did not need to check
    (a batch from the network still goes through the header checks). ``data`` has base offset 0
    and partition leader epoch -1, as :func:`encode_for_log` writes them; the log sets both.
    """

    data: bytes
    last_offset_delta: int
    max_timestamp: int


def encode_for_log(
    entries: Sequence[tuple[bytes | None, bytes | None]],
    timestamp_ms: int,
    *,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> EncodedBatch:
    """One uncompressed batch of ``entries`` at ``timestamp_ms``; relative offsets (the log sets the base),
    with the header facts the log would otherwise parse back.

    ``attributes``, ``producer_id`` and ``producer_epoch`` go into the header as given: a
    transactional batch (attribute bit 4) or a control batch (bit 5) names its producer; any other
    batch keeps the defaults (no producer). The base sequence is always -1: nothing written here
    takes part in idempotent sequencing."""
    parts: list[bytes] = []
    small = SMALL_VARINTS
    for delta, (key, value) in enumerate(entries):
        if key is None:
            key_part = b"\x01"
        else:
            size = len(key)
            key_part = (small[size] if size < _SMALL else signed_varint(size)) + key
        if value is None:
            value_part = b"\x01"
        else:
            size = len(value)
            value_part = (small[size] if size < _SMALL else signed_varint(size)) + value
        body = b"".join(
            (
                b"\x00\x00",  # attributes, timestamp delta 0
                small[delta] if delta < _SMALL else signed_varint(delta),
                key_part,
                value_part,
                b"\x00",  # no headers
            )
        )
        size = len(body)
        parts.append(small[size] if size < _SMALL else signed_varint(size))
        parts.append(body)
    return batch_for_log(
        b"".join(parts),
        len(entries),
        timestamp_ms,
        attributes=attributes,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


def batch_for_log(
    records: bytes,
    count: int,
    timestamp_ms: int,
    *,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> EncodedBatch:
    """The batch around ``count`` records already laid out (offset deltas 0 to ``count - 1``, each
    with its length prefix), as :func:`encode_for_log` finishes it."""
    after_crc = (
        _HEADER_AFTER_CRC.pack(
            attributes, count - 1, timestamp_ms, timestamp_ms, producer_id, producer_epoch, -1, count
        )
        + records
    )
    crc = crc32c.crc32c(after_crc)
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(records)
    data = _PREFIX.pack(0, batch_length, -1, 2) + _CRC.pack(crc) + after_crc
    return EncodedBatch(data, count - 1, timestamp_ms)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptBatchError("varint too long")


def iter_plain_records(buf: bytes, pos: int = 0) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of each record of the batch at ``pos``, after checking its CRC.

    Raises :class:`CorruptBatchError` for a torn or corrupt batch and ``NotImplementedError`` for
    a compressed one (the caller decodes those another way).
    """
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError("torn batch header")
    header = parse_header(buf, pos)
    end = pos + header.size
    if header.magic != 2 or header.batch_length < HEADER_SIZE - LOG_OVERHEAD or end > len(buf):
        raise CorruptBatchError(f"not a whole magic-2 batch at {pos}")
    if crc32c.crc32c(memoryview(buf)[pos + CRC_START : end]) != header.crc:
        raise CorruptBatchError(f"CRC mismatch in the batch at offset {header.base_offset}")
    if header.compression != Compression.NONE:
        raise NotImplementedError("compressed batch")
    base = header.base_offset
    at = pos + HEADER_SIZE
    try:
        for _ in range(header.record_count):
            length, at = _read_varint(buf, at)
            record_end = at + length
            at += 1  # attributes
            _, at = _read_varint(buf, at)  # timestamp delta
            delta, at = _read_varint(buf, at)
            key_length, at = _read_varint(buf, at)
            key = None if key_length < 0 else buf[at : at + key_length]
            at += max(key_length, 0)
            value_length, at = _read_varint(buf, at)
            value = None if value_length < 0 else buf[at : at + value_length]
            if record_end > end:
                raise CorruptBatchError(f"a record overruns the batch at offset {base}")
            at = record_end
            yield base + delta, key, value
    except IndexError as exc:
        raise CorruptBatchError(f"a record overruns the batch at offset {base}") from exc
