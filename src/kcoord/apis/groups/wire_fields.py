"""Field readers shared by the hand-written request readers of the hot group APIs.

Flat functions over ``(buffer, position)`` returning the value and the next position: on the hot
path a reader object and a call per field would cost more than the fields. A read past the end
raises ``ValueError``, ``struct.error`` or ``IndexError``; each reader turns the last two into
``ValueError`` so that the router leaves the frame to kio.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct(">hhi")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


def header_client_id(buf: bytes, flexible: bool) -> tuple[str | None, int]:
    """The request header's client id (never compact) and the position of the body."""
    size = I16.unpack_from(buf, 8)[0]
    pos = 10
    client_id = None if size < 0 else text(buf, pos, size)
    pos += max(size, 0)
    if flexible:
        pos = skip_tagged_fields(buf, pos)
    return client_id, pos


def text(buf: bytes, pos: int, size: int) -> str:
    if pos + size > len(buf):
        raise ValueError("frame ends early")
    return buf[pos : pos + size].decode("utf-8")


def string(buf: bytes, pos: int, flexible: bool) -> tuple[str | None, int]:
    """A (nullable) string and the position after it."""
    if flexible:
        size = buf[pos]
        if size < 0x80:
            pos += 1
        else:
            size, pos = uvarint(buf, pos)
        size -= 1
    else:
        size = I16.unpack_from(buf, pos)[0]
        pos += 2
    if size < 0:
        return None, pos
    return text(buf, pos, size), pos + size


def array_length(buf: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's length (-1 for a null array) and the position of its first element."""
    if flexible:
        count, pos = uvarint(buf, pos)
        count -= 1
    else:
        count = I32.unpack_from(buf, pos)[0]
        pos += 4
    return max(count, -1), pos


def uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ValueError("bad unsigned varint")


def skip_tagged_fields(buf: bytes, pos: int) -> int:
    if buf[pos] == 0:
        return pos + 1
    count, pos = uvarint(buf, pos)
    for _ in range(count):
        _, pos = uvarint(buf, pos)
        size, pos = uvarint(buf, pos)
        pos += size
    return pos
