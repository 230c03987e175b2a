"""Zigzag varints: the boundaries of the encoding and reading past the end."""

from __future__ import annotations

import pytest

from kcoord.protocol.guard_source import uvarint
from kcoord.protocol.varint import encode_uvarint, encode_varint, read_varint


@pytest.mark.parametrize("value", [0, -1, 1, 63, -64, 64, 300, -(2**31), 2**31 - 1, -(2**63), 2**63 - 1])
def test_a_value_reads_back_as_written(value: int) -> None:
    encoded = encode_varint(value)
    assert read_varint(b"\xff" + encoded + b"\x00", 1) == (value, 1 + len(encoded))


def test_small_values_take_one_byte_in_zigzag_order() -> None:
    assert [encode_varint(v) for v in (0, -1, 1, -2)] == [b"\x00", b"\x01", b"\x02", b"\x03"]


@pytest.mark.parametrize("buf", [b"", b"\x80", b"\xff" * 11])
def test_a_varint_that_runs_past_its_buffer_is_a_value_error(buf: bytes) -> None:
    with pytest.raises(ValueError, match="runs past"):
        read_varint(buf, 0)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16_383, 16_384, 2**32 - 1])
def test_an_unsigned_varint_reads_back_as_kafka_reads_it(value: int) -> None:
    encoded = encode_uvarint(value)
    assert uvarint(b"\xff" + encoded, 1, "field") == (value, 1 + len(encoded))
