"""Kafka's zigzag varints (varint and varlong alike), as the record format (magic 2) uses them, and
the unsigned varints of the flexible request versions' lengths and tags.

The offsets log's hot path (:mod:`kcoord.protocol.plain_batch`) encodes the one-byte case inline and
the rest here, and reads with its own unrolled copy; these serve the readers and writers that look
inside records less often (the log cleaner, the CLI) in full.
"""

from __future__ import annotations

__all__ = ["encode_uvarint", "encode_varint", "read_varint"]


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint/varlong at ``pos``: (value, position after it); ValueError past the end."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("varint runs past the end of the record")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def encode_varint(value: int) -> bytes:
    """``value`` (a 64-bit signed integer) as a zigzag varint."""
    return encode_uvarint((value << 1) ^ (value >> 63))


def encode_uvarint(value: int) -> bytes:
    """``value`` (a non-negative integer) as an unsigned varint, as Kafka's ``writeUnsignedVarint``."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
