"""Field readers shared by the hand-written request readers of the hot group APIs.

Flat functions over ``(buffer, position)`` returning the value and the next position: on the hot
path a reader object and a call per field would cost more than the fields. A read past the end
raises ``ValueError``, ``struct.error`` or ``IndexError``; each reader turns the last two into
``ValueError`` so that the router leaves the frame to kio.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

_Read = TypeVar("_Read")

HEADER = struct.Struct(">hhi")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


def frame_reader(api_name: str, decode: Callable[[bytes], _Read]) -> Callable[[bytes], _Read]:
    """``decode``, with a read past the frame's end (``struct.error``, ``IndexError``) turned into
    the ``ValueError`` by which the router leaves the frame to kio."""

    def read(frame: bytes) -> _Read:
        try:
            return decode(frame)
        except (struct.error, IndexError) as exc:
            raise ValueError(f"{api_name} frame ends early: {exc}") from None

    return read


def request_start(
    buf: bytes, key: int, api_name: str, versions: range, first_flexible: int
) -> tuple[int, int, str | None, bool, int]:
    """A frame's request header, checked to be of API ``key`` at one of ``versions``: the version,
    the correlation id, the client id, whether the version is flexible, and the body's position."""
    api_key, version, correlation_id = HEADER.unpack_from(buf, 0)
    if api_key != key or version not in versions:
        article = "an" if api_name[0] in "AEIOU" else "a"
        span = f"v{versions.start}-{versions.stop - 1}"
        raise ValueError(f"not {article} {api_name} {span} frame (key {api_key} v{version})")
    flexible = version >= first_flexible
    client_id, pos = header_client_id(buf, flexible)
    return version, correlation_id, client_id, flexible, pos


def group_member(buf: bytes, pos: int, flexible: bool, api_name: str) -> tuple[str, int, str, int]:
    """The group id, generation id (int32) and member id that open a Heartbeat or OffsetCommit
    body (neither id may be null), and the position after them."""
    group_id, pos = string(buf, pos, flexible)
    generation = I32.unpack_from(buf, pos)[0]
    member_id, pos = string(buf, pos + 4, flexible)
    if group_id is None or member_id is None:
        raise ValueError(f"null group or member id in {api_name} frame")
    return group_id, generation, member_id, pos


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
    end = pos + size
    if end > len(buf):  # text(), inline: five strings in every OffsetCommit
        raise ValueError("frame ends early")
    return buf[pos:end].decode("utf-8"), end


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
