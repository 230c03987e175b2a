"""Record batch v2 header parsing, produce validation, scanning and append-time rewriting."""

from __future__ import annotations

import datetime
import io
import struct

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import (
    HEADER_SIZE,
    Compression,
    TruncatedBatchError,
    batch_leader_epoch,
    iter_batches,
    parse_header,
    prepare_for_append,
    valid_prefix_length,
    validate_produced,
    with_base_offset,
    with_log_append_time,
)

EPOCH_2024_MS = 1704067200000


def make_batch(
    values: list[bytes] | None = None,
    *,
    timestamp_ms: int = EPOCH_2024_MS,
    producer_id: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """A batch written by kio's independent writer."""
    values = values if values is not None else [b"v"]
    records = tuple(
        Record(
            attributes=i8(0),
            timestamp=TZAwareMicros.parse(
                datetime.datetime.fromtimestamp((timestamp_ms + i) / 1000, tz=datetime.UTC)
            ),
            offset=i64(i),
            key=None,
            value=value,
            headers=(),
        )
        for i, value in enumerate(values)
    )
    out = io.BytesIO()
    write_new_batch(
        out,
        NewRecordBatch(
            producer_id=i64(producer_id),
            producer_epoch=i16(0 if producer_id >= 0 else -1),
            base_sequence=i32(base_sequence),
            records=records,
            attributes=i16(attributes),
        ),
    )
    return out.getvalue()


def patched(data: bytes, fmt: str, at: int, value: int, *, fix_crc: bool = True) -> bytes:
    """``data`` with one field overwritten, the CRC recomputed unless told otherwise."""
    buf = bytearray(data)
    struct.pack_into(fmt, buf, at, value)
    if fix_crc:
        struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def error_of(data: bytes, api_version: int = 9) -> ErrorCode:
    with pytest.raises(KafkaError) as caught:
        validate_produced(data, api_version=api_version)
    return caught.value.code


def test_parse_header_reads_every_field() -> None:
    """The header of a three-record batch exposes offsets, timestamps, producer fields and the size."""
    data = make_batch([b"a", b"b", b"c"], producer_id=7, base_sequence=3)
    header = parse_header(data)
    assert header.magic == 2
    assert header.size == len(data)
    assert header.record_count == 3
    assert header.last_offset_delta == 2
    assert header.last_offset == 2
    assert header.base_timestamp == EPOCH_2024_MS
    assert header.max_timestamp == EPOCH_2024_MS + 2
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 0, 3)
    assert header.compression == Compression.NONE
    assert not (header.is_transactional or header.is_control or header.is_log_append_time)


def test_parse_header_flags_and_short_input() -> None:
    """Attribute bits map to compression and flags; fewer than 61 bytes raise TruncatedBatchError."""
    header = parse_header(make_batch(attributes=0x10 | 0x20 | 0x08 | Compression.LZ4))
    assert header.compression == Compression.LZ4
    assert header.is_transactional and header.is_control and header.is_log_append_time
    with pytest.raises(TruncatedBatchError):
        parse_header(make_batch()[: HEADER_SIZE - 1])


def test_validate_accepts_a_good_batch() -> None:
    """A well-formed idempotent batch passes and its header is returned."""
    data = make_batch([b"x", b"y"], producer_id=1, base_sequence=0)
    assert validate_produced(data, api_version=3).record_count == 2


def test_validate_rejects_bad_crc_as_corrupt() -> None:
    """A flipped record byte fails the CRC: CORRUPT_MESSAGE."""
    data = bytearray(make_batch([b"hello"]))
    data[-3] ^= 0xFF
    assert error_of(bytes(data)) == ErrorCode.corrupt_message


def test_validate_rejects_length_mismatches_as_corrupt() -> None:
    """A batch cut short, a batchLength too large or trailing garbage is CORRUPT_MESSAGE."""
    data = make_batch([b"hello"])
    assert error_of(data[:-1]) == ErrorCode.corrupt_message
    assert error_of(data[:20]) == ErrorCode.corrupt_message
    assert error_of(patched(data, ">i", 8, len(data), fix_crc=False)) == ErrorCode.corrupt_message
    assert error_of(data + b"\x00\x01") == ErrorCode.corrupt_message


def test_validate_rejects_two_batches() -> None:
    """A Produce v3+ partition may hold exactly one batch: INVALID_RECORD."""
    assert error_of(make_batch() + make_batch()) == ErrorCode.invalid_record


def test_validate_rejects_old_magic() -> None:
    """Magic 0 and 1 message sets are UNSUPPORTED_FOR_MESSAGE_FORMAT."""
    data = make_batch()
    assert error_of(patched(data, ">b", 16, 1, fix_crc=False)) == ErrorCode.unsupported_for_message_format
    assert (
        error_of(patched(data, ">b", 16, 0, fix_crc=False)[:30]) == ErrorCode.unsupported_for_message_format
    )


def test_validate_rejects_inconsistent_counts() -> None:
    """lastOffsetDelta + 1 must equal recordCount, and recordCount must be positive: INVALID_RECORD."""
    data = make_batch([b"a", b"b"])
    assert error_of(patched(data, ">i", 23, 5)) == ErrorCode.invalid_record
    assert error_of(patched(patched(data, ">i", 57, 0), ">i", 23, -1)) == ErrorCode.invalid_record


def test_validate_rejects_control_batches_and_missing_sequence() -> None:
    """Control batches from clients, and a producer id without a base sequence, are INVALID_RECORD."""
    assert error_of(make_batch(attributes=0x20)) == ErrorCode.invalid_record
    assert error_of(make_batch(producer_id=5, base_sequence=-1)) == ErrorCode.invalid_record


def test_validate_zstd_needs_produce_v7() -> None:
    """A zstd batch is UNSUPPORTED_COMPRESSION_TYPE before Produce v7 and accepted from v7."""
    data = make_batch(attributes=Compression.ZSTD)
    assert error_of(data, api_version=6) == ErrorCode.unsupported_compression_type
    assert validate_produced(data, api_version=7).compression == Compression.ZSTD


def test_with_base_offset_keeps_crc_valid() -> None:
    """Rewriting the base offset changes bytes 0-7 only and the CRC still verifies."""
    data = make_batch([b"a", b"b"])
    moved = with_base_offset(data, 1234)
    assert moved[8:] == data[8:]
    assert parse_header(moved).base_offset == 1234
    validate_produced(moved, api_version=9)


def test_with_log_append_time_sets_flag_time_and_crc() -> None:
    """LogAppendTime sets bit 3 and maxTimestamp, recomputes the CRC, and leaves records untouched."""
    data = make_batch([b"a", b"b"])
    stamped = with_log_append_time(data, 1_800_000_000_000)
    header = parse_header(stamped)
    assert header.is_log_append_time
    assert header.max_timestamp == 1_800_000_000_000
    assert stamped[HEADER_SIZE:] == data[HEADER_SIZE:]
    validate_produced(stamped, api_version=9)
    batch, _ = read_batch(stamped, 0)
    assert [r.value for r in batch.records] == [b"a", b"b"]


def test_prepare_for_append_sets_offset_epoch_and_optional_time() -> None:
    """The stored form has the assigned offset and leader epoch (-1 unless given); the CRC stays valid."""
    data = make_batch([b"a"])
    plain = prepare_for_append(data, base_offset=42)
    assert parse_header(plain).base_offset == 42
    assert parse_header(plain).partition_leader_epoch == -1 == batch_leader_epoch(plain)
    led = prepare_for_append(data, base_offset=42, leader_epoch=7)
    assert parse_header(led).partition_leader_epoch == 7 == batch_leader_epoch(led)
    validate_produced(led, api_version=9)
    assert batch_leader_epoch(b"short") == -1
    assert plain[16:] == data[16:]
    stamped = prepare_for_append(data, base_offset=43, log_append_time_ms=99)
    assert parse_header(stamped).max_timestamp == 99
    validate_produced(stamped, api_version=9)


def test_iter_batches_walks_concatenated_batches() -> None:
    """Positions and headers come out in order for back-to-back batches."""
    first, second = make_batch([b"a"]), make_batch([b"b", b"c"])
    found = list(iter_batches(first + second, verify_crc=True))
    assert [pos for pos, _ in found] == [0, len(first)]
    assert [h.record_count for _, h in found] == [1, 2]


def test_iter_batches_stops_at_a_corrupt_batch_when_verifying() -> None:
    """With CRC checks a damaged second batch ends the scan; without them it is still yielded."""
    first, second = make_batch([b"a"]), bytearray(make_batch([b"bb"]))
    second[-2] ^= 0x55
    buf = first + bytes(second)
    assert valid_prefix_length(buf, verify_crc=True) == len(first)
    assert valid_prefix_length(buf, verify_crc=False) == len(buf)


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=6),
    cut=st.integers(min_value=0, max_value=2000),
)
def test_iter_batches_stops_cleanly_at_any_truncation(sizes: list[int], cut: int) -> None:
    """Cutting a run of batches anywhere yields exactly the batches that are still whole."""
    batches = [make_batch([bytes(size)]) for size in sizes]
    buf = b"".join(batches)
    cut = min(cut, len(buf))
    ends = []
    total = 0
    for batch in batches:
        total += len(batch)
        ends.append(total)
    whole = [end for end in ends if end <= cut]
    found = list(iter_batches(buf[:cut], verify_crc=True))
    assert len(found) == len(whole)
    assert valid_prefix_length(buf[:cut]) == (whole[-1] if whole else 0)
