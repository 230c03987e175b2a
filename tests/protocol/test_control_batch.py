"""Transaction markers and transactional batches, read back by the log's own header and record parsers."""

from __future__ import annotations

from kcoord.protocol.control_batch import (
    encode_marker_batch,
    encode_transactional_batch,
    read_control_record,
)
from kcoord.protocol.plain_batch import iter_plain_records
from kcoord.protocol.record_batch import parse_header


def test_marker_batch_header_names_the_producer_and_is_control_and_transactional() -> None:
    """A commit marker is transactional and control, names its producer, and reads back as commit, epoch 7."""
    batch = encode_marker_batch(4242, 3, True, 7, 1_700_000_000_000)
    header = parse_header(batch.data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (4242, 3)
    assert header.record_count == 1 and batch.last_offset_delta == 0
    [(offset, key, value)] = list(iter_plain_records(batch.data))
    assert offset == 0
    assert read_control_record(key, value) == (True, 7)


def test_abort_marker_reads_back_as_abort() -> None:
    """An abort marker's control record says not committed."""
    batch = encode_marker_batch(1, 0, False, 0, 1)
    [(_, key, value)] = list(iter_plain_records(batch.data))
    assert read_control_record(key, value) == (False, 0)


def test_unknown_control_types_and_short_keys_read_as_none() -> None:
    """A control type other than abort/commit, or a key too short to hold one, is skipped (None)."""
    assert read_control_record(b"\x00\x00\x00\x05", b"\x00\x00\x00\x00\x00\x00") is None
    assert read_control_record(b"\x00", None) is None
    assert read_control_record(None, None) is None
    assert read_control_record(b"\x00\x00\x00\x01", None) == (True, -1)


def test_transactional_batch_is_transactional_but_not_control() -> None:
    """Records written inside a transaction carry the producer and the transactional bit only."""
    batch = encode_transactional_batch([(b"k", b"v"), (b"k2", None)], 9, 1, 5)
    header = parse_header(batch.data)
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.record_count) == (9, 1, 2)
    assert [(k, v) for _, k, v in iter_plain_records(batch.data)] == [(b"k", b"v"), (b"k2", None)]
