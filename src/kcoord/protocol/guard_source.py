"""The pieces of the request guard's compiled walks: the source of a length check, and its helpers.

:mod:`kcoord.protocol.guard` turns a kio schema into lines of Python that move an offset ``pos``
through ``frame`` (``end`` bounds the region being walked); :class:`Namespace` compiles those lines
into functions. The lines only reference the helpers here, objects registered with the namespace
under generated names, and field names as literals (checked to be dotted identifiers); nothing taken
from a frame ever reaches the source.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

Frame = bytes | memoryview
Step = Callable[[Frame, int, int], int]
"""``step(frame, offset, end) -> offset after the field``; raises :class:`MalformedRequestError`."""

MAX_STRING_BYTES = 0x7FFF
"""Kafka's generated readers refuse a longer string (``had invalid length``) even where the compact
encoding could carry one; so does the guard, which also keeps every id short enough for the int16
string lengths of the offsets-log records."""
MAX_UVARINT = 0xFFFFFFFF
_MAX_VARINT_BYTES = 5


class MalformedRequestError(ValueError):
    """The frame declares more than it holds, or breaks its schema's rules; nothing was allocated."""


def fail(field: str, message: str) -> typing.NoReturn:
    raise MalformedRequestError(f"{field}: {message}")


def uvarint(frame: Frame, pos: int, field: str) -> tuple[int, int]:
    """An unsigned varint of at most five bytes and 32 bits, as Kafka's ``readUnsignedVarint``."""
    value = 0
    shift = 0
    for _ in range(_MAX_VARINT_BYTES):
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > MAX_UVARINT:
                fail(field, f"varint {value} exceeds 32 bits")
            return value, pos
        shift += 7
    fail(field, "varint longer than five bytes")


def _overrun(field: str, size: int, pos: int, end: int) -> typing.NoReturn:
    fail(field, f"declares {size} bytes, {max(end - pos, 0)} left in the frame")


def _too_long(field: str, size: int, longest: int) -> typing.NoReturn:
    fail(field, f"string of {size} bytes, longer than {longest}")


def _bad_length(field: str, size: int) -> typing.NoReturn:
    fail(field, "null in a non-nullable field" if size == -1 else f"length {size}")


def short() -> typing.NoReturn:
    raise IndexError("frame ends inside a length")


class Namespace:
    """Where compiled walks live: the helpers, plus every object they call, under generated names."""

    def __init__(self) -> None:
        self._globals: dict[str, Any] = {
            "_uvarint": uvarint,
            "_overrun": _overrun,
            "_too_long": _too_long,
            "_bad_length": _bad_length,
            "_short": short,
            "_compact": compact_slow,
            "_negative": negative_length,
        }
        self._names: dict[int, str] = {}

    def name(self, value: Any) -> str:
        """The generated name under which compiled code reaches ``value`` (a function or a string)."""
        name = self._names.get(id(value))
        if name is None:
            name = self._names[id(value)] = f"_ref{len(self._names)}"
            self._globals[name] = value
        return name

    def function(self, what: str, lines: tuple[str, ...]) -> Step:
        """``def walk(frame, pos, end)`` running ``lines`` and returning ``pos``."""
        return typing.cast(Step, self._compile(what, "frame, pos, end", lines))

    def request(self, what: str, lines: tuple[str, ...]) -> Callable[[Frame], int]:
        """``def walk(frame)`` over a whole request: ``pos`` starts after the header's fixed 8 bytes
        (key, version, correlation id, which the caller has already read), ``end`` is its length."""
        return typing.cast(
            Callable[[Frame], int], self._compile(what, "frame", ("end = len(frame)", "pos = 8", *lines))
        )

    def _compile(self, what: str, parameters: str, lines: tuple[str, ...]) -> Any:
        body = "\n".join(f"    {line}" for line in (*lines, "return pos"))
        code = compile(f"def walk({parameters}):\n{body}\n", f"<guard of {what}>", "exec")
        scope: dict[str, Any] = {}
        exec(code, self._globals, scope)  # source made only from the templates in this module
        return scope["walk"]


def compact_length(field: str, nullable: bool, longest: int) -> tuple[str, ...]:
    """uvarint length + 1 (0 is null), then that many bytes.

    A one-byte length (1-127) is the common case and costs one addition: its bound is checked by the
    walk's final ``pos <= end`` (nothing is allocated or looped over in between, and an array's
    count is compared with ``end - pos``, which such an overrun has already made negative).
    """
    f = _field_name(field)
    return (
        "n = frame[pos]",
        "if 0 < n < 0x80:",
        "    pos += n",
        "else:",
        f"    pos = _compact(frame, pos, end, {f}, {nullable}, {longest})",
    )


def compact_slow(frame: Frame, pos: int, end: int, field: str, nullable: bool, longest: int) -> int:
    """A null or a multi-byte compact length: checked at once."""
    size, pos = uvarint(frame, pos, field)
    if size == 0:
        if nullable:
            return pos
        _bad_length(field, -1)
    size -= 1
    if size > longest:
        _too_long(field, size, longest)
    if size > end - pos:
        _overrun(field, size, pos, end)
    return pos + size


def legacy_length(field: str, nullable: bool, width: int) -> tuple[str, ...]:
    """int16 (strings) or int32 (bytes, records) length, -1 is null, then that many bytes."""
    f = _field_name(field)
    if width == 2:  # at most 32767 bytes: the final bound check covers it, as for compact lengths
        return (
            "n = frame[pos] << 8 | frame[pos + 1]",
            "if n < 0x8000:",
            "    pos += 2 + n",
            "else:",
            f"    pos = _negative(pos + 2, n - 0x10000, {f}, {nullable})",
        )
    return (
        'n = int.from_bytes(frame[pos : pos + 4], "big", signed=True) if pos + 4 <= len(frame) else _short()',
        "pos += 4",
        "if n >= 0:",
        "    if n > end - pos:",
        f"        _overrun({f}, n, pos, end)",
        "    pos += n",
        "else:",
        f"    pos = _negative(pos, n, {f}, {nullable})",
    )


def negative_length(pos: int, size: int, field: str, nullable: bool) -> int:
    """-1 is null where the schema allows it; any other negative length is refused."""
    if size == -1 and nullable:
        return pos
    _bad_length(field, size)


_FIELD_NAMES: dict[str, str] = {}


def _field_name(field: str) -> str:
    """A safe Python literal for a field's name (kio's identifiers and dots only, checked)."""
    literal = _FIELD_NAMES.get(field)
    if literal is None:
        if not all(part.isidentifier() for part in field.removesuffix("[]").split(".")):
            raise ValueError(f"unexpected field name {field!r}")
        literal = _FIELD_NAMES[field] = repr(field)
    return literal
