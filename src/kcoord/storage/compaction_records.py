"""The records inside a batch, as the log cleaner needs them: keys out, surviving records back in.

Everywhere else the log treats batches as opaque bytes; only compaction must look inside, to
learn each record's key and whether it is a tombstone (a null value). Record layout (magic 2)::

    length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value, headerCount varint, headers

A record is kept as its decoded offset, timestamp and key plus its stored bytes from the key on
(``tail``), so a rebuilt batch re-encodes only the two deltas and copies the rest unchanged.

Compressed batches are decompressed to read their keys: gzip always, snappy, lz4 and zstd only
when their libraries (python-snappy, lz4, zstandard) are importable; a batch rebuilt from them is
written uncompressed.
"""

from __future__ import annotations

import gzip
import importlib
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import crc32c

from kcoord.protocol.record_batch import CRC_START, HEADER_SIZE, LOG_OVERHEAD, BatchHeader, Compression
from kcoord.protocol.varint import encode_varint, read_varint

__all__ = ["DELETE_HORIZON_FLAG", "CleanableRecord", "decode_records", "encode_batch"]

DELETE_HORIZON_FLAG = 0x40
"""Attribute bit 6 (KIP-534): ``baseTimestamp`` holds the time after which tombstones may go."""
_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME_FLAG = 0x08
_PREFIX = struct.Struct(">qiibI")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class CleanableRecord:
    offset: int
    timestamp: int
    """The stored timestamp (base timestamp + delta), whatever the batch's timestamp type."""
    key: bytes | None
    tombstone: bool
    attributes: int
    tail: bytes
    """The record's stored bytes from the key length to the end of its headers."""


def decode_records(batch: bytes | memoryview, header: BatchHeader) -> list[CleanableRecord] | None:
    """The records of one whole batch, or None when its codec is not available here.

    Raises ``ValueError`` when the records do not parse.
    """
    body: bytes | memoryview = memoryview(batch)[HEADER_SIZE : header.size]
    if header.compression != Compression.NONE:
        decompress = _decompressor(header.compression)
        if decompress is None:
            return None
        body = decompress(bytes(body))
    records: list[CleanableRecord] = []
    pos = 0
    for _ in range(header.record_count):
        length, pos = read_varint(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise ValueError("record runs past the batch")
        attributes = body[pos]
        timestamp_delta, at = read_varint(body, pos + 1)
        offset_delta, tail_start = read_varint(body, at)
        key_length, at = read_varint(body, tail_start)
        key = bytes(body[at : at + key_length]) if key_length >= 0 else None
        value_length, _ = read_varint(body, at + max(key_length, 0))
        records.append(
            CleanableRecord(
                offset=header.base_offset + offset_delta,
                timestamp=header.base_timestamp + timestamp_delta,
                key=key,
                tombstone=value_length < 0,
                attributes=attributes,
                tail=bytes(body[tail_start:end]),
            )
        )
        pos = end
    if pos != len(body):
        raise ValueError("batch holds bytes after its last record")
    return records


def encode_batch(
    template: BatchHeader, records: Sequence[CleanableRecord], *, delete_horizon_ms: int | None
) -> bytes:
    """An uncompressed batch of ``records`` (offsets and timestamps kept), with ``template``'s producer
    fields, leader epoch and timestamp type, a new CRC-32C, and the delete horizon when one is given.
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    base_offset = records[0].offset
    base_timestamp = records[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    encoded = []
    for record in records:
        inner = b"".join(
            (
                bytes([record.attributes & 0xFF]),
                encode_varint(record.timestamp - base_timestamp),
                encode_varint(record.offset - base_offset),
                record.tail,
            )
        )
        encoded.append(encode_varint(len(inner)) + inner)
    attributes = template.attributes & ~(_COMPRESSION_MASK | DELETE_HORIZON_FLAG)
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG
    if template.attributes & _LOG_APPEND_TIME_FLAG:
        max_timestamp = template.max_timestamp
    else:
        max_timestamp = max(record.timestamp for record in records)
    after_crc = _AFTER_CRC.pack(
        attributes,
        records[-1].offset - base_offset,
        base_timestamp,
        max_timestamp,
        template.producer_id,
        template.producer_epoch,
        template.base_sequence,
        len(records),
    ) + b"".join(encoded)
    batch_length = len(after_crc) + CRC_START - LOG_OVERHEAD
    prefix = _PREFIX.pack(
        base_offset, batch_length, template.partition_leader_epoch, 2, crc32c.crc32c(after_crc)
    )
    return prefix + after_crc


def _decompressor(codec: int) -> Callable[[bytes], bytes] | None:
    if codec == Compression.GZIP:
        return gzip.decompress
    if codec == Compression.SNAPPY:
        snappy = _optional_module("snappy")
        return None if snappy is None else lambda data: _unframe_snappy(data, snappy.decompress)
    if codec == Compression.LZ4:
        lz4_frame = _optional_module("lz4.frame")
        return None if lz4_frame is None else lambda data: bytes(lz4_frame.decompress(data))
    if codec == Compression.ZSTD:
        zstandard = _optional_module("zstandard")
        if zstandard is None:
            return None
        return lambda data: bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))
    return None


def _optional_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _unframe_snappy(data: bytes, decompress: Callable[[bytes], bytes]) -> bytes:
    """Raw snappy, or the xerial framing (magic, versions, then length-prefixed blocks) Java clients write."""
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(decompress(data))
    out = []
    pos = _XERIAL_HEADER
    while pos + 4 <= len(data):
        (length,) = _I32.unpack_from(data, pos)
        out.append(bytes(decompress(data[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    return b"".join(out)
