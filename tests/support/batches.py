"""Build and read Kafka record batches (magic 2) by hand, for tests that speak raw protocol.

Written independently of the server's own codec (``kcoord.protocol.record_batch``) so that a bug
there cannot hide itself in both sides of a test. Only uncompressed batches are built; reading
decodes the records of uncompressed batches and reports the header of every batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c

_PREFIX = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordCount
HEADER_SIZE = 61
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@dataclass(frozen=True)
class RawRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True)
class RawBatch:
    base_offset: int
    last_offset: int
    attributes: int
    records: tuple[RawRecord, ...]
    """Empty for compressed batches (their records are not decoded here)."""

    @property
    def compression(self) -> str:
        return COMPRESSION_NAMES[self.attributes & 0x07]


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _varbytes(value: bytes | None) -> bytes:
    if value is None:
        return _varint(-1)
    return _varint(len(value)) + value


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    timestamp_ms: int,
    headers: Sequence[tuple[str, bytes]] = (),
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """One uncompressed batch of (key, value) records, all with ``timestamp_ms`` and ``headers``.

    ``attributes`` other than compression (always none): 0x10 transactional, 0x20 control."""
    assert records, "a batch holds at least one record"
    body = bytearray()
    for delta, (key, value) in enumerate(records):
        record = bytearray(b"\x00")  # attributes
        record += _varint(0)  # timestamp delta
        record += _varint(delta)
        record += _varbytes(key)
        record += _varbytes(value)
        record += _varint(len(headers))
        for name, header_value in headers:
            record += _varbytes(name.encode()) + _varbytes(header_value)
        body += _varint(len(record)) + record
    after_crc = (
        _AFTER_CRC.pack(
            attributes & ~0x07,  # no compression
            len(records) - 1,
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + body
    )
    crc = crc32c.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch + magic + crc + the rest
    return _PREFIX.pack(0, batch_length, -1, 2) + struct.pack(">I", crc) + after_crc


def corrupt_crc(batch: bytes) -> bytes:
    """``batch`` with one bit of its stored CRC flipped."""
    flipped = bytearray(batch)
    flipped[17] ^= 0x01
    return bytes(flipped)


class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    def varbytes(self) -> bytes | None:
        size = self.varint()
        if size < 0:
            return None
        value = self.data[self.pos : self.pos + size]
        self.pos += size
        return value


def read_batches(data: bytes) -> Iterator[RawBatch]:
    """Every whole batch in ``data`` (a Fetch response's records); a cut-off tail is ignored."""
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        base_offset, batch_length, _epoch, magic = _PREFIX.unpack_from(data, pos)
        end = pos + 12 + batch_length
        if end > len(data):
            return
        assert magic == 2, f"magic {magic} at {pos}"
        (stored_crc,) = struct.unpack_from(">I", data, pos + 17)
        assert crc32c.crc32c(data[pos + 21 : end]) == stored_crc, f"bad CRC in batch at {base_offset}"
        attributes, last_delta, base_ts, _max_ts, _pid, _pepoch, _seq, count = _AFTER_CRC.unpack_from(
            data, pos + 21
        )
        records: list[RawRecord] = []
        if attributes & 0x07 == 0:
            reader = _Reader(data, pos + HEADER_SIZE)
            for _ in range(count):
                reader.varint()  # record length
                reader.pos += 1  # attributes
                ts_delta = reader.varint()
                offset_delta = reader.varint()
                key = reader.varbytes()
                value = reader.varbytes()
                headers = []
                for _ in range(reader.varint()):
                    name = reader.varbytes()
                    assert name is not None
                    headers.append((name.decode(), reader.varbytes()))
                records.append(
                    RawRecord(base_offset + offset_delta, base_ts + ts_delta, key, value, tuple(headers))
                )
        yield RawBatch(base_offset, base_offset + last_delta, attributes, tuple(records))
        pos = end
