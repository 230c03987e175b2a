"""The primitives of coordinator records: bounds-checked reads and size-checked writes of Kafka's
int, string, bytes, array and tagged-field encodings, and the errors they raise.

Shared by every coordinator record codec; the field groups several schemas repeat are built on these
in :mod:`kcoord.coordinator.record_fields`.
"""

from __future__ import annotations

import struct
import uuid

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class RecordDecodeError(ValueError):
    """A key or value of the offsets log is not a valid record."""


class UnsupportedRecordVersionError(RecordDecodeError):
    """A known record type carries a value version this codec cannot read."""


class RecordEncodeError(ValueError):
    """A record has a field that does not fit Kafka's layout (out of range or too long)."""


MAX_RECORD_STRING_BYTES = 0x7FFF
"""Record strings have int16 lengths: an id longer than this cannot be written to the log."""


def fits_record_string(value: str | None, extra_bytes: int = 0) -> bool:
    """Whether ``value`` (plus ``extra_bytes`` the core will add to it) fits a record string."""
    if value is None:
        return True
    if len(value) * 4 + extra_bytes <= MAX_RECORD_STRING_BYTES:  # no encoding needed for short ids
        return True
    return len(value.encode("utf-8")) + extra_bytes <= MAX_RECORD_STRING_BYTES


class RecordReader:
    """A bounds-checked cursor over one key or value."""

    __slots__ = ("_buf", "_pos", "_what")

    def __init__(self, buf: bytes, what: str) -> None:
        self._buf = buf
        self._pos = 0
        self._what = what

    def _fail(self, message: str) -> RecordDecodeError:
        return RecordDecodeError(f"{self._what}: {message} at byte {self._pos} of {len(self._buf)}")

    @property
    def what(self) -> str:
        """What is being read (the name error messages give it)."""
        return self._what

    def _take(self, n: int, field: str) -> bytes:
        end = self._pos + n
        if n < 0 or end > len(self._buf):
            raise self._fail(f"{field} needs {n} bytes, {len(self._buf) - self._pos} left")
        chunk = self._buf[self._pos : end]
        self._pos = end
        return chunk

    def _int(self, codec: struct.Struct, field: str) -> int:
        value: int = codec.unpack(self._take(codec.size, field))[0]
        return value

    def int8(self, field: str) -> int:
        return self._int(_INT8, field)

    def int16(self, field: str) -> int:
        return self._int(_INT16, field)

    def uuid(self, field: str) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16, field))

    def int32(self, field: str) -> int:
        return self._int(_INT32, field)

    def int64(self, field: str) -> int:
        return self._int(_INT64, field)

    def uvarint(self, field: str) -> int:
        result = 0
        for shift in range(0, 35, 7):
            byte = self._take(1, field)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if result > 0xFFFFFFFF:
                    raise self._fail(f"{field} varint exceeds 32 bits")
                return result
        raise self._fail(f"{field} varint is longer than 5 bytes")

    def _length(self, field: str, flexible: bool, *, wide: bool = False) -> int:
        """A length prefix; -1 means null."""
        if flexible:
            return self.uvarint(field) - 1
        return self.int32(field) if wide else self.int16(field)

    def nullable_string(self, field: str, flexible: bool) -> str | None:
        length = self._length(field, flexible)
        if length < -1:
            raise self._fail(f"{field} has invalid length {length}")
        if length == -1:
            return None
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._fail(f"{field} is not valid UTF-8 ({exc.reason})") from None

    def string(self, field: str, flexible: bool) -> str:
        value = self.nullable_string(field, flexible)
        if value is None:
            raise self._fail(f"{field} is null but not nullable")
        return value

    def bytes_(self, field: str, flexible: bool) -> bytes:
        length = self._length(field, flexible, wide=True)
        if length < 0:
            raise self._fail(f"{field} has invalid length {length}")
        return self._take(length, field)

    def array_length(self, field: str, flexible: bool) -> int:
        length = self._length(field, flexible, wide=True)
        if length < 0:
            raise self._fail(f"{field} has invalid length {length}")
        if length > len(self._buf) - self._pos:
            raise self._fail(f"{field} claims {length} elements, more than the bytes left")
        return length

    def sub(self, buf: bytes, what: str) -> RecordReader:
        """A reader over a nested payload (a tagged field's bytes)."""
        return RecordReader(buf, f"{self._what}.{what}")

    def tagged_fields(self, struct_name: str) -> dict[int, bytes]:
        """The struct's tagged fields, raw, by tag (for a struct whose tags are read)."""
        fields: dict[int, bytes] = {}
        for _ in range(self.uvarint(f"{struct_name} tagged field count")):
            tag = self.uvarint(f"{struct_name} tag")
            size = self.uvarint(f"{struct_name} tagged field size")
            fields[tag] = self._take(size, f"{struct_name} tagged field")
        return fields

    def skip_tagged_fields(self, struct_name: str) -> None:
        count = self.uvarint(f"{struct_name} tagged field count")
        for _ in range(count):
            self.uvarint(f"{struct_name} tag")
            size = self.uvarint(f"{struct_name} tagged field size")
            self._take(size, f"{struct_name} tagged field")

    def finish(self) -> None:
        if self._pos != len(self._buf):
            raise self._fail(f"{len(self._buf) - self._pos} trailing bytes")


class RecordWriter:
    """Appends Kafka primitives to a buffer, refusing values that do not fit."""

    __slots__ = ("_flexible", "_out", "_what")

    def __init__(self, what: str, *, flexible: bool = False) -> None:
        self._out = bytearray()
        self._what = what
        self._flexible = flexible

    def _pack(self, codec: struct.Struct, value: int, field: str) -> None:
        try:
            self._out += codec.pack(value)
        except struct.error:
            raise RecordEncodeError(
                f"{self._what}.{field}={value} does not fit in {codec.size * 8} bits"
            ) from None

    def int8(self, value: int, field: str) -> None:
        self._pack(_INT8, value, field)

    def int16(self, value: int, field: str) -> None:
        self._pack(_INT16, value, field)

    def uuid(self, value: uuid.UUID) -> None:
        self._out += value.bytes

    def int32(self, value: int, field: str) -> None:
        self._pack(_INT32, value, field)

    def int64(self, value: int, field: str) -> None:
        self._pack(_INT64, value, field)

    def uvarint(self, value: int) -> None:
        while value > 0x7F:
            self._out.append((value & 0x7F) | 0x80)
            value >>= 7
        self._out.append(value)

    def _length(self, length: int | None, field: str, *, wide: bool) -> None:
        """A length prefix; None means null."""
        if not wide and length is not None and length > MAX_RECORD_STRING_BYTES:
            raise RecordEncodeError(f"{self._what}.{field} is {length} bytes, more than 32767")
        if self._flexible:
            self.uvarint(0 if length is None else length + 1)
        elif wide:
            self.int32(-1 if length is None else length, field)
        else:
            self.int16(-1 if length is None else length, field)

    def nullable_string(self, value: str | None, field: str) -> None:
        if value is None:
            self._length(None, field, wide=False)
            return
        raw = value.encode("utf-8")
        self._length(len(raw), field, wide=False)
        self._out += raw

    def string(self, value: str, field: str) -> None:
        self.nullable_string(value, field)

    def bytes_(self, value: bytes, field: str) -> None:
        self._length(len(value), field, wide=True)
        self._out += value

    def array_length(self, length: int, field: str) -> None:
        self._length(length, field, wide=True)

    def empty_tagged_fields(self) -> None:
        if self._flexible:
            self.uvarint(0)

    def sub(self, what: str) -> RecordWriter:
        """A writer for a nested payload (a tagged field's bytes), as flexible as this one."""
        return RecordWriter(f"{self._what}.{what}", flexible=self._flexible)

    def tagged_fields(self, fields: dict[int, bytes]) -> None:
        """Tagged fields given as raw payloads by tag, in ascending tag order."""
        self.uvarint(len(fields))
        for tag in sorted(fields):
            self.uvarint(tag)
            self.uvarint(len(fields[tag]))
            self._out += fields[tag]

    def getvalue(self) -> bytes:
        return bytes(self._out)
