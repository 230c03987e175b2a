"""The offsets log's own batch codec agrees with kio both ways, checks CRCs and refuses torn batches."""

from __future__ import annotations

import pytest
from kio.records.readers import read_batch

from kcoord.protocol.plain_batch import CorruptBatchError, encode_for_log, iter_plain_records
from kcoord.protocol.record_batch import parse_header, validate_produced
from tests.support.batches import build_batch

ENTRIES: list[tuple[bytes | None, bytes | None]] = [(b"k1", b"v" * 300), (b"k2", None), (None, b"x")]


def test_an_encoded_batch_reads_back_with_kio_and_passes_produce_validation() -> None:
    """Keys, values (null ones too), offsets and the timestamp come back through kio; the CRC is valid."""
    data = encode_for_log(ENTRIES, 1_700_000_000_123).data
    validate_produced(data, api_version=9)
    batch, size = read_batch(data, 0)
    assert size == len(data)
    assert [(int(r.offset), r.key, r.value) for r in batch.records] == [
        (i, k, v) for i, (k, v) in enumerate(ENTRIES)
    ]
    assert parse_header(data).max_timestamp == 1_700_000_000_123


def test_kio_built_batches_read_back_with_offsets_from_the_base() -> None:
    """A batch built elsewhere is read as (offset, key, value) from its base offset."""
    data = bytearray(build_batch([(b"a", b"1"), (b"b", None)], timestamp_ms=5))
    data[0:8] = (40).to_bytes(8, "big")
    assert list(iter_plain_records(bytes(data))) == [(40, b"a", b"1"), (41, b"b", None)]


def test_a_flipped_byte_or_a_torn_batch_is_corrupt() -> None:
    """A CRC mismatch and a batch cut short both raise CorruptBatchError."""
    data = bytearray(encode_for_log(ENTRIES, 1).data)
    data[-1] ^= 1
    with pytest.raises(CorruptBatchError):
        list(iter_plain_records(bytes(data)))
    with pytest.raises(CorruptBatchError):
        list(iter_plain_records(encode_for_log(ENTRIES, 1).data[:-3]))
