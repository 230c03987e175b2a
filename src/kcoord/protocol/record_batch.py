"""Kafka record batch v2 (magic 2): the header fields a broker reads and rewrites.

Records are never decoded here: the produce path checks the 61-byte header plus one CRC-32C
over the batch, and the log stores the bytes as they came except for the first 16 bytes
(base offset, partition leader epoch), which the CRC does not cover, and, for topics with
``message.timestamp.type=LogAppendTime``, the attributes and max timestamp, which it does.

Layout, big-endian::

    0 baseOffset i64        23 lastOffsetDelta i32   53 baseSequence i32
    8 batchLength i32       27 baseTimestamp i64     57 recordCount i32
    12 partitionLeaderEpoch 35 maxTimestamp i64      61 records
    16 magic i8             43 producerId i64
    17 crc u32              51 producerEpoch i16
    21 attributes i16

``batchLength`` counts the bytes after itself, so a whole batch is ``12 + batchLength`` bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "CRC_START",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "BatchHeader",
    "Compression",
    "TruncatedBatchError",
    "batch_leader_epoch",
    "iter_batches",
    "parse_header",
    "prepare_for_append",
    "valid_prefix_length",
    "validate_produced",
    "with_base_offset",
    "with_log_append_time",
]

HEADER_SIZE = 61
"""Bytes before the first record."""
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes that ``batchLength`` does not count."""
CRC_START = 21
"""The CRC covers the attributes field to the end of the batch."""
MAGIC_OFFSET = 16
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME_FLAG = 0x08
_TRANSACTIONAL_FLAG = 0x10
_CONTROL_FLAG = 0x20

_ZSTD_MIN_PRODUCE_VERSION = 7
_NO_LEADER_EPOCH = -1


class Compression:
    """Codec ids of attribute bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TruncatedBatchError(ValueError):
    """Fewer bytes than a batch header needs."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed 61-byte header of a magic-2 batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & _LOG_APPEND_TIME_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_FLAG)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Read the header at ``pos``; raise :class:`TruncatedBatchError` when fewer than 61 bytes remain."""
    if len(buf) - pos < HEADER_SIZE:
        raise TruncatedBatchError(f"need {HEADER_SIZE} header bytes at {pos}, have {len(buf) - pos}")
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def crc_matches(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    """Whether the stored CRC matches bytes ``pos+21 .. pos+size`` (the caller ensured they exist)."""
    view = memoryview(buf)[pos + CRC_START : pos + header.size]
    return int(crc32c.crc32c(view)) == header.crc


def validate_produced(data: bytes, *, api_version: int) -> BatchHeader:
    """Check one partition's ``records`` from a Produce request (v3+) and return its header.

    Exactly one magic-2 batch is accepted. The header is checked and the CRC computed once;
    records are not decoded.
    """
    if len(data) <= MAGIC_OFFSET:
        raise KafkaError(ErrorCode.corrupt_message, "record set shorter than a batch header")
    magic = data[MAGIC_OFFSET]
    if magic < 2:
        raise KafkaError(ErrorCode.unsupported_for_message_format, f"magic {magic} batches are not accepted")
    if magic > 2 or len(data) < HEADER_SIZE:
        raise KafkaError(ErrorCode.corrupt_message, "record set shorter than a batch header")
    header = parse_header(data)
    if header.batch_length < MIN_BATCH_LENGTH or header.size > len(data):
        raise KafkaError(ErrorCode.corrupt_message, "batch length does not match the record set")
    if header.size < len(data):
        if _holds_another_batch(data, header.size):
            raise KafkaError(ErrorCode.invalid_record, "a produce request must carry exactly one batch")
        raise KafkaError(ErrorCode.corrupt_message, "bytes left over after the batch")
    if not crc_matches(data, 0, header):
        raise KafkaError(ErrorCode.corrupt_message, "record batch CRC mismatch")
    if header.record_count <= 0 or header.last_offset_delta + 1 != header.record_count:
        raise KafkaError(ErrorCode.invalid_record, "lastOffsetDelta does not match recordCount")
    if header.is_control:
        raise KafkaError(ErrorCode.invalid_record, "clients may not produce control batches")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise KafkaError(ErrorCode.invalid_record, "an idempotent batch needs a base sequence")
    if header.compression > Compression.ZSTD:
        raise KafkaError(ErrorCode.corrupt_message, f"unknown compression codec {header.compression}")
    if header.compression == Compression.ZSTD and api_version < _ZSTD_MIN_PRODUCE_VERSION:
        raise KafkaError(ErrorCode.unsupported_compression_type, "zstd needs Produce v7 or later")
    return header


def _holds_another_batch(data: bytes, pos: int) -> bool:
    if len(data) - pos < LOG_OVERHEAD:
        return False
    (length,) = _I32.unpack_from(data, pos + 8)
    return bool(length >= MIN_BATCH_LENGTH and pos + LOG_OVERHEAD + length <= len(data))


def iter_batches(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = False, start: int = 0
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each whole, sane batch from ``start``.

    Stops quietly at the first place that is not a whole magic-2 batch (a torn tail, garbage,
    or, with ``verify_crc``, a CRC mismatch); the valid data then ends at the last yielded
    ``position + header.size`` (see :func:`valid_prefix_length`).
    """
    pos = start
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = BatchHeader(*_HEADER.unpack_from(buf, pos))
        if header.magic != 2 or header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end:
            return
        if verify_crc and not crc_matches(buf, pos, header):
            return
        yield pos, header
        pos += header.size


def valid_prefix_length(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> int:
    """Bytes from the start of ``buf`` that form whole, sane batches."""
    end = 0
    for pos, header in iter_batches(buf, verify_crc=verify_crc):
        end = pos + header.size
    return end


def with_base_offset(data: bytes, base_offset: int) -> bytes:
    """``data`` with bytes 0-7 replaced; the CRC does not cover them."""
    return _I64.pack(base_offset) + data[8:]


def batch_leader_epoch(data: bytes | bytearray | memoryview) -> int:
    """The partition leader epoch stamped on the batch at the start of ``data`` (-1: none, or no batch)."""
    if len(data) < HEADER_SIZE:
        return _NO_LEADER_EPOCH
    (epoch,) = _I32.unpack_from(data, 12)
    return int(epoch)


def with_log_append_time(data: bytes, now_ms: int) -> bytes:
    """``data`` stamped with the broker's time: attribute bit 3 set, maxTimestamp = now, CRC recomputed."""
    head = bytearray(data[:HEADER_SIZE])
    _stamp_log_append_time(head, memoryview(data)[HEADER_SIZE:], now_ms)
    return b"".join((head, memoryview(data)[HEADER_SIZE:]))


def prepare_for_append(
    data: bytes,
    *,
    base_offset: int,
    log_append_time_ms: int | None = None,
    leader_epoch: int = _NO_LEADER_EPOCH,
) -> bytes:
    """The bytes the log stores: base offset and the leader epoch it is appended under (as Kafka's
    leader stamps every batch, so a consumer's position carries the epoch, KIP-320), LogAppendTime
    stamped if asked.

    Only the header is rewritten; the records are copied once, never parsed. Base offset and
    leader epoch lie before the CRC's range, so without LogAppendTime they are spliced in (the
    commit path's append) and the CRC is left alone.
    """
    if log_append_time_ms is None:
        return b"".join((_I64.pack(base_offset), data[8:12], _I32.pack(leader_epoch), memoryview(data)[16:]))
    head = bytearray(data[:HEADER_SIZE])
    _I64.pack_into(head, 0, base_offset)
    _I32.pack_into(head, 12, leader_epoch)
    body = memoryview(data)[HEADER_SIZE:]
    _stamp_log_append_time(head, body, log_append_time_ms)
    return b"".join((head, body))


def _stamp_log_append_time(head: bytearray, body: memoryview, now_ms: int) -> None:
    (attributes,) = _I16.unpack_from(head, 21)
    _I16.pack_into(head, 21, attributes | _LOG_APPEND_TIME_FLAG)
    _I64.pack_into(head, 35, now_ms)
    crc = crc32c.crc32c(memoryview(head)[CRC_START:])
    _U32.pack_into(head, 17, crc32c.crc32c(body, value=crc))
