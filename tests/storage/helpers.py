"""Test helpers for the log engines: a manual clock and a fast batch builder."""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable

import crc32c

from kcoord.storage import LogStore

T0_MS = 1_700_000_000_000
TINY_CACHE_BYTES = 1024
"""The batch cache of the ``postgresql-cold`` engine: a few small batches, so most reads miss it."""


class ManualClock:
    """A clock that moves only when told."""

    def __init__(self, now_ms: int = T0_MS) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def build_batch(values: list[bytes], *, timestamps: list[int] | None = None, attributes: int = 0) -> bytes:
    """A magic-2 batch with one record per value (base offset 0, no producer id)."""
    stamps = timestamps if timestamps is not None else [T0_MS] * len(values)
    base_ts = stamps[0]
    records = []
    for delta, (value, stamp) in enumerate(zip(values, stamps, strict=True)):
        body = b"\x00" + _varint(stamp - base_ts) + _varint(delta) + _varint(-1) + _varint(len(value)) + value
        body += _varint(0)
        records.append(_varint(len(body)) + body)
    tail = struct.pack(
        ">hiqqqhii", attributes, len(values) - 1, base_ts, max(stamps), -1, -1, -1, len(values)
    ) + b"".join(records)
    crc = crc32c.crc32c(tail)
    return struct.pack(">qiibI", 0, len(tail) + 9, 0, 2, crc) + tail


BatchBuilder = Callable[..., bytes]
StoreFactory = Callable[..., Awaitable[LogStore]]
