"""Records as ``kcoord produce`` and ``kcoord consume`` see them: one magic-2 batch out, batches in.

Produced batches are uncompressed, without a producer id (acks=all, no idempotence), each record
with its own timestamp. Fetched batches are decoded with the log cleaner's reader, so gzip always
and snappy, lz4 and zstd when their libraries are importable; control batches are skipped.
A key picks its partition as Kafka's default partitioner does (murmur2), so the CLI and Java or
librdkafka's ``murmur2_random`` producers put a key in the same place.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

from kcoord.protocol.record_batch import iter_batches
from kcoord.protocol.varint import encode_varint, read_varint
from kcoord.storage.compaction_records import decode_records

__all__ = ["ConsoleRecord", "decode_fetched", "encode_batch", "partition_for_key"]

_AFTER_CRC = struct.Struct(">hiqqqhii")
_PREFIX = struct.Struct(">qiibI")
_LOG_APPEND_TIME = 0x08
_HEADER_FIELDS_AFTER_LENGTH = 4 + 1 + 4  # leader epoch, magic, crc


@dataclass(frozen=True, slots=True)
class ConsoleRecord:
    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int = -1
    partition: int = -1
    offset: int = -1


def encode_batch(records: Sequence[ConsoleRecord]) -> bytes:
    """One uncompressed batch at base offset 0 (the broker assigns the offsets)."""
    if not records:
        raise ValueError("a batch needs at least one record")
    base_ts = records[0].timestamp_ms
    body = []
    for delta, record in enumerate(records):
        inner = b"".join(
            (
                b"\x00",
                encode_varint(record.timestamp_ms - base_ts),
                encode_varint(delta),
                _varbytes(record.key),
                _varbytes(record.value),
                encode_varint(len(record.headers)),
                *(_varbytes(name.encode()) + _varbytes(value) for name, value in record.headers),
            )
        )
        body.append(encode_varint(len(inner)) + inner)
    max_ts = max(r.timestamp_ms for r in records)
    after_crc = _AFTER_CRC.pack(0, len(records) - 1, base_ts, max_ts, -1, -1, -1, len(records)) + b"".join(
        body
    )
    prefix = _PREFIX.pack(0, len(after_crc) + _HEADER_FIELDS_AFTER_LENGTH, -1, 2, crc32c.crc32c(after_crc))
    return prefix + after_crc


def decode_fetched(data: bytes, partition: int, from_offset: int) -> list[ConsoleRecord]:
    """The records at or after ``from_offset`` in a Fetch response's record set (a torn tail is ignored)."""
    records: list[ConsoleRecord] = []
    view = memoryview(data)
    for pos, header in iter_batches(view):
        if header.is_control or header.next_offset <= from_offset:
            continue
        decoded = decode_records(view[pos : pos + header.size], header)
        if decoded is None:
            raise ValueError(f"a batch at offset {header.base_offset} uses a codec this install cannot read")
        for record in decoded:
            if record.offset < from_offset:
                continue
            value, headers = _value_and_headers(record.tail)
            timestamp = header.max_timestamp if header.attributes & _LOG_APPEND_TIME else record.timestamp
            records.append(ConsoleRecord(value, record.key, headers, timestamp, partition, record.offset))
    return records


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's ``Utils.toPositive(Utils.murmur2(key)) % partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 (seed 0x9747b28c), as a signed Java int."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length % 4
    if tail:
        rest = data[length - tail :]
        if tail == 3:
            h ^= rest[2] << 16
        if tail >= 2:
            h ^= rest[1] << 8
        h ^= rest[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def _value_and_headers(tail: bytes) -> tuple[bytes | None, tuple[tuple[str, bytes | None], ...]]:
    """A record's stored bytes from the key on: key, value, then the headers."""
    _, pos = _read_bytes(tail, 0)
    value, pos = _read_bytes(tail, pos)
    count, pos = read_varint(tail, pos)
    headers = []
    for _ in range(count):
        name, pos = _read_bytes(tail, pos)
        header_value, pos = _read_bytes(tail, pos)
        headers.append(((name or b"").decode("utf-8", "replace"), header_value))
    return value, tuple(headers)


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        return None, pos
    return buf[pos : pos + length], pos + length


def _varbytes(value: bytes | None) -> bytes:
    return encode_varint(-1) if value is None else encode_varint(len(value)) + value
