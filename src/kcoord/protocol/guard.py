"""Checks every length a request frame declares against the bytes the frame holds, before kio reads it.

kio 0.6.5's native reader sizes an array's storage from the length the frame declares, before it
reads a single item: a compact array whose length varint says 13 billion makes it ask for 100 GB
and the Rust allocator aborts the whole process (``memory allocation of … failed``). A twelve-byte
OffsetFetch does it. So before kio sees a request, :func:`check_request` walks the frame along the
request's kio schema and refuses it when

- an array declares more items than the bytes left could hold (every item takes at least a byte),
- a string, bytes or records field, or a tagged field, declares more bytes than are left,
- a varint runs past five bytes or past 2^32 - 1 (Kafka's own readers refuse those too),
- a string is longer than 32767 bytes (as Kafka's readers refuse: ids must fit the records),
- a null arrives where the schema does not allow one (kio would hand the handler a ``None`` for a
  non-nullable array, and handlers rightly expect a tuple).

The walk allocates nothing in proportion to a declared length: it only moves an offset, and loops
over array items only after their count has been bounded by the frame's size, so its cost is linear
in the frame. Each schema is compiled once into a tuple of small step functions (consecutive fixed
width fields folded into one step), cached per request class.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_STRING_BYTES", "MalformedRequestError", "check_request", "compile_request"]

Frame = bytes | memoryview
Step = Callable[[Frame, int, int], int]
"""``step(frame, offset, end) -> offset after the field``; raises :class:`MalformedRequestError`."""

_FIXED_WIDTHS = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}

_MAX_VARINT_BYTES = 5
MAX_STRING_BYTES = 0x7FFF
"""Kafka's generated readers refuse a longer string (``had invalid length``) even where the compact
encoding could carry one; so does the guard, which also keeps every id short enough for the int16
string lengths of the offsets-log records."""
_MAX_UVARINT = 0xFFFFFFFF


class MalformedRequestError(ValueError):
    """The frame declares more than it holds, or breaks its schema's rules; nothing was allocated."""


def _fail(field: str, message: str) -> typing.NoReturn:
    raise MalformedRequestError(f"{field}: {message}")


def _uvarint(frame: Frame, pos: int, field: str) -> tuple[int, int]:
    """An unsigned varint of at most five bytes and 32 bits, as Kafka's ``readUnsignedVarint``."""
    value = 0
    shift = 0
    for _ in range(_MAX_VARINT_BYTES):
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > _MAX_UVARINT:
                _fail(field, f"varint {value} exceeds 32 bits")
            return value, pos
        shift += 7
    _fail(field, "varint longer than five bytes")


def _int16(frame: Frame, pos: int) -> int:
    return int.from_bytes(frame[pos : pos + 2], "big", signed=True) if pos + 2 <= len(frame) else _short()


def _int32(frame: Frame, pos: int) -> int:
    return int.from_bytes(frame[pos : pos + 4], "big", signed=True) if pos + 4 <= len(frame) else _short()


def _short() -> typing.NoReturn:
    raise IndexError("frame ends inside a length")


def _fixed(width: int) -> Step:
    def step(frame: Frame, pos: int, end: int) -> int:
        return pos + width

    return step


def _sized(field: str, size: int, pos: int, end: int) -> int:
    """``pos`` moved past ``size`` bytes, refused when the frame does not hold them."""
    if size > end - pos:
        _fail(field, f"declares {size} bytes, {max(end - pos, 0)} left in the frame")
    return pos + size


def _legacy_string(field: str, nullable: bool, length_bytes: int) -> Step:
    """int16 (strings) or int32 (bytes, records) length; -1 is null."""
    read_length = _int16 if length_bytes == 2 else _int32

    def step(frame: Frame, pos: int, end: int) -> int:
        size = read_length(frame, pos)
        pos += length_bytes
        if size < 0:
            if size == -1 and nullable:
                return pos
            _fail(field, f"length {size}" if size != -1 else "null in a non-nullable field")
        return _sized(field, size, pos, end)

    return step


def _compact_string(field: str, nullable: bool, longest: int) -> Step:
    """uvarint length + 1; 0 is null. ``longest`` is 32767 for strings, as Kafka's readers check."""

    def step(frame: Frame, pos: int, end: int) -> int:
        size = frame[pos]
        if size < 0x80:  # one-byte lengths are the common case: no varint call
            pos += 1
        else:
            size, pos = _uvarint(frame, pos, field)
            if size - 1 > longest:
                _fail(field, f"string of {size - 1} bytes, longer than {longest}")
        if size == 0:
            if nullable:
                return pos
            _fail(field, "null in a non-nullable field")
        if size - 1 > end - pos:
            _fail(field, f"declares {size - 1} bytes, {max(end - pos, 0)} left in the frame")
        return pos + size - 1

    return step


def _array(field: str, nullable: bool, flexible: bool, item_steps: tuple[Step, ...], min_item: int) -> Step:
    def step(frame: Frame, pos: int, end: int) -> int:
        if flexible:
            count, pos = _uvarint(frame, pos, field)
            count -= 1
        else:
            count = _int32(frame, pos)
            pos += 4
        if count < 0:
            if count == -1 and nullable:
                return pos
            _fail(field, f"item count {count}" if count != -1 else "null in a non-nullable array")
        if count * min_item > end - pos:
            _fail(field, f"declares {count} items, {max(end - pos, 0)} bytes left in the frame")
        for _ in range(count):
            for item_step in item_steps:
                pos = item_step(frame, pos, end)
            if pos > end:
                _fail(field, "items overrun the frame")
        return pos

    return step


def _nullable_entity(field: str, nullable: bool, steps: tuple[Step, ...]) -> Step:
    """A struct field: an int8 marker (-1 null, 1 present) then the struct."""

    def step(frame: Frame, pos: int, end: int) -> int:
        marker = frame[pos]
        pos += 1
        if marker == 0xFF:
            if nullable:
                return pos
            _fail(field, "null in a non-nullable struct")
        for inner in steps:
            pos = inner(frame, pos, end)
        return pos

    return step


def _tagged_fields(owner: str, known: dict[int, tuple[Step, ...]]) -> Step:
    """The tagged-field section: count, then (tag, size, payload); a known tag's payload is walked too."""

    def step(frame: Frame, pos: int, end: int) -> int:
        if frame[pos] == 0:  # no tagged fields: the common case
            return pos + 1
        count, pos = _uvarint(frame, pos, owner)
        if count * 2 > end - pos:
            _fail(owner, f"declares {count} tagged fields, {max(end - pos, 0)} bytes left in the frame")
        for _ in range(count):
            tag, pos = _uvarint(frame, pos, owner)
            size, pos = _uvarint(frame, pos, owner)
            stop = _sized(f"{owner} tag {tag}", size, pos, end)
            for inner in known.get(tag, ()):
                pos = inner(frame, pos, stop)
            if pos > stop:
                _fail(f"{owner} tag {tag}", "payload overruns its declared size")
            pos = stop
        return pos

    return step


def _is_nullable(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _strip_none(annotation: Any) -> Any:
    if _is_nullable(annotation):
        (inner,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return inner
    return annotation


@dataclasses.dataclass(frozen=True, slots=True)
class _Compiled:
    steps: tuple[Step, ...]
    min_size: int
    fixed: bool = False


def _field_steps(owner: str, field: dataclasses.Field[Any], annotation: Any, flexible: bool) -> _Compiled:
    """Steps for one field and the fewest bytes it can take on the wire."""
    name = f"{owner}.{field.name}"
    nullable = _is_nullable(annotation)
    inner = _strip_none(annotation)
    kafka_type = field.metadata.get("kafka_type")
    if typing.get_origin(inner) is tuple:
        (item_type, _ellipsis) = typing.get_args(inner)
        item = _item_steps(name, item_type, kafka_type, flexible)
        return _Compiled((_array(name, nullable, flexible, item.steps, max(item.min_size, 1)),), 1)
    if dataclasses.is_dataclass(inner):
        nested = _entity(typing.cast(type[Any], inner))
        return _Compiled((_nullable_entity(name, nullable, nested.steps),), 1 + nested.min_size)
    return _primitive(name, kafka_type, nullable, flexible)


def _item_steps(name: str, item_type: Any, kafka_type: Any, flexible: bool) -> _Compiled:
    if dataclasses.is_dataclass(item_type):
        return _entity(typing.cast(type[Any], item_type))
    return _primitive(f"{name}[]", kafka_type, _is_nullable(item_type), flexible)


def _primitive(name: str, kafka_type: Any, nullable: bool, flexible: bool) -> _Compiled:
    width = _FIXED_WIDTHS.get(kafka_type) if isinstance(kafka_type, str) else None
    if width is not None:
        return _Compiled((_fixed(width),), width, fixed=True)
    if kafka_type == "string":
        if flexible:
            return _Compiled((_compact_string(name, nullable, MAX_STRING_BYTES),), 1)
        return _Compiled((_legacy_string(name, nullable, 2),), 2)
    if kafka_type in ("bytes", "records"):
        if flexible:
            return _Compiled((_compact_string(name, nullable, _MAX_UVARINT),), 1)
        return _Compiled((_legacy_string(name, nullable, 4),), 4)
    raise TypeError(f"{name}: no guard for kafka_type {kafka_type!r}")


def _fold_fixed(compiled: list[_Compiled]) -> tuple[Step, ...]:
    """Consecutive fixed-width fields become one step (fewer calls on the hot path)."""
    steps: list[Step] = []
    run = 0
    for part in compiled:
        if part.fixed:
            run += part.min_size
            continue
        if run:
            steps.append(_fixed(run))
            run = 0
        steps.extend(part.steps)
    if run:
        steps.append(_fixed(run))
    return tuple(steps)


_ENTITIES: dict[type[Any], _Compiled] = {}
_REQUESTS: dict[type[Any], tuple[Step, ...]] = {}


def _entity(cls: type[Any]) -> _Compiled:
    compiled = _ENTITIES.get(cls)
    if compiled is None:
        compiled = _ENTITIES[cls] = _compile_entity(cls)
    return compiled


def _compile_entity(cls: type[Any]) -> _Compiled:
    """Steps for every field of a kio entity in wire order, then its tagged fields when flexible."""
    owner = cls.__qualname__
    flexible = bool(getattr(cls, "__flexible__", False))
    hints = typing.get_type_hints(cls)
    parts: list[_Compiled] = []
    tagged: dict[int, tuple[Step, ...]] = {}
    for field in dataclasses.fields(cls):
        compiled = _field_steps(owner, field, hints[field.name], flexible)
        tag = field.metadata.get("tag")
        if tag is None:
            parts.append(compiled)
        else:
            tagged[int(tag)] = compiled.steps
    steps = _fold_fixed(parts)
    min_size = sum(part.min_size for part in parts)
    if flexible:
        steps = (*steps, _tagged_fields(owner, tagged))
        min_size += 1
    return _Compiled(steps, min_size)


def _header_steps(flexible: bool) -> tuple[Step, ...]:
    """Request header v1/v2: key, version, correlation id, then a nullable int16-length client id.

    The client id keeps its int16 length even in the flexible v2 header, as Kafka specifies.
    """
    steps: tuple[Step, ...] = (_fixed(8), _legacy_string("RequestHeader.client_id", True, 2))
    return (*steps, _tagged_fields("RequestHeader", {})) if flexible else steps


def compile_request(cls: type[Any]) -> tuple[Step, ...]:
    """The header and body steps of a kio request class (cached: one compilation per api and version)."""
    steps = _REQUESTS.get(cls)
    if steps is None:
        header_flexible = bool(getattr(cls.__header_schema__, "__flexible__", False))
        steps = _REQUESTS[cls] = (*_header_steps(header_flexible), *_entity(cls).steps)
    return steps


def check_request(cls: type[Any], frame: Frame) -> None:
    """Refuse ``frame`` (header and body of a ``cls`` request) if any length it declares overruns it.

    Raises :class:`MalformedRequestError` naming the field; bytes after the body are allowed, as
    Kafka's readers allow them.
    """
    end = len(frame)
    pos = 0
    try:
        for step in compile_request(cls):
            pos = step(frame, pos, end)
    except IndexError:
        raise MalformedRequestError(f"{cls.__qualname__}: frame ends inside a field") from None
    if pos > end:
        raise MalformedRequestError(f"{cls.__qualname__}: fields overrun the frame ({pos} > {end})")
