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
in the frame.

Every request is checked, so the walk is on the heartbeat hot path. A loop over one small function
per field cost about as much as kio's own decoding; instead each entity is compiled once, from its
schema, into one straight-line Python function (:mod:`kcoord.protocol.guard_source` writes its
source): fixed-width fields fold into one addition, one-byte lengths need no call, and only arrays,
nullable structs and non-empty tagged-field sections call out. The functions are cached per class.

Unknown tagged fields: Kafka's generated readers skip a tag they do not know (a newer client may
send one), but kio's reader raises ``KeyError`` on it. The walk already steps over them; it also
notes each tagged-field section that holds one, and :func:`check_request` then returns the frame
with those fields cut out (and the section's count lowered), so kio reads exactly the fields it
knows. The same kio class drives both, so the guard and the decoder agree on what is unknown. One
case is left to kio: an unknown tag nested inside the payload of a *known* tagged field (cutting it
would change the declared size of that payload); no request schema kcoord serves has such a payload
with tagged fields of its own that a client sends.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any

from kcoord.protocol.guard_source import (
    MAX_STRING_BYTES,
    MAX_UVARINT,
    Frame,
    MalformedRequestError,
    Namespace,
    Step,
    compact_length,
    fail,
    legacy_length,
    short,
    uvarint,
)
from kcoord.protocol.varint import encode_uvarint

__all__ = ["MAX_STRING_BYTES", "MalformedRequestError", "check_request", "compile_request"]

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

_NAMESPACE = Namespace()


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    """Source lines that move ``pos`` past one field, and the fewest bytes the field takes."""

    lines: tuple[str, ...]
    min_size: int
    fixed: bool = False


def _array(field: str, nullable: bool, flexible: bool, item: Step, min_item: int) -> Step:
    def step(frame: Frame, pos: int, end: int) -> int:
        if flexible:
            count, pos = uvarint(frame, pos, field)
            count -= 1
        else:
            count = (
                int.from_bytes(frame[pos : pos + 4], "big", signed=True) if pos + 4 <= len(frame) else short()
            )
            pos += 4
        if count < 0:
            if count == -1 and nullable:
                return pos
            fail(field, f"item count {count}" if count != -1 else "null in a non-nullable array")
        if count * min_item > end - pos:
            fail(field, f"declares {count} items, {max(end - pos, 0)} bytes left in the frame")
        for _ in range(count):
            pos = item(frame, pos, end)
            if pos > end:
                fail(field, "items overrun the frame")
        return pos

    return step


def _nullable_struct(walk: Step) -> Step:
    """A nullable struct field: an int8 marker (-1 null, 1 present) then the struct when present."""

    def step(frame: Frame, pos: int, end: int) -> int:
        marker = frame[pos]
        return pos + 1 if marker == 0xFF else walk(frame, pos + 1, end)

    return step


@dataclasses.dataclass(frozen=True, slots=True)
class _SectionWithUnknownTags:
    """A tagged-field section ``[start, end)`` of the frame and the spans of its known fields."""

    start: int
    end: int
    kept: tuple[tuple[int, int], ...]


_UNKNOWN_TAGS: list[_SectionWithUnknownTags] = []
"""Sections with unknown tags the current walk met (walks are synchronous: one at a time)."""


def _tagged_fields(owner: str, known: dict[int, Step]) -> Step:
    """A non-empty tagged-field section: count, then (tag, size, payload); known payloads walked too,
    and a section holding an unknown tag noted for :func:`check_request` to cut them out."""

    def step(frame: Frame, pos: int, end: int) -> int:
        start = pos
        count, pos = uvarint(frame, pos, owner)
        if count * 2 > end - pos:
            fail(owner, f"declares {count} tagged fields, {max(end - pos, 0)} bytes left in the frame")
        kept: list[tuple[int, int]] = []
        for _ in range(count):
            field_start = pos
            tag, pos = uvarint(frame, pos, owner)
            size, pos = uvarint(frame, pos, owner)
            if size > end - pos:
                fail(f"{owner} tag {tag}", f"declares {size} bytes, {max(end - pos, 0)} left in the frame")
            stop = pos + size
            walk = known.get(tag)
            if walk is not None:
                noted = len(_UNKNOWN_TAGS)
                if walk(frame, pos, stop) > stop:
                    fail(f"{owner} tag {tag}", "payload overruns its declared size")
                del _UNKNOWN_TAGS[noted:]  # inside a sized payload: left to kio (module docstring)
                kept.append((field_start, stop))
            pos = stop
        if len(kept) < count:
            _UNKNOWN_TAGS.append(_SectionWithUnknownTags(start, pos, tuple(kept)))
        return pos

    return step


def _without_unknown_tags(frame: Frame, sections: list[_SectionWithUnknownTags]) -> bytes:
    """``frame`` with the unknown fields of ``sections`` cut out and each section's count lowered."""
    out = bytearray()
    copied = 0
    for section in sorted(sections, key=lambda s: s.start):
        out += frame[copied : section.start]
        out += encode_uvarint(len(section.kept))
        for field_start, field_end in section.kept:
            out += frame[field_start:field_end]
        copied = section.end
    out += frame[copied:]
    return bytes(out)


def _is_nullable(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _strip_none(annotation: Any) -> Any:
    if _is_nullable(annotation):
        (inner,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return inner
    return annotation


def _call(step: Step) -> tuple[str, ...]:
    return (f"pos = {_NAMESPACE.name(step)}(frame, pos, end)",)


def _field(owner: str, field: dataclasses.Field[Any], annotation: Any, flexible: bool) -> _Field:
    name = f"{owner}.{field.name}"
    nullable = _is_nullable(annotation)
    inner = _strip_none(annotation)
    kafka_type = field.metadata.get("kafka_type")
    if typing.get_origin(inner) is tuple:
        (item_type, _ellipsis) = typing.get_args(inner)
        if dataclasses.is_dataclass(item_type):
            item_walk, item_min = _entity(typing.cast(type[Any], item_type))
        else:
            item = _primitive(f"{name}[]", kafka_type, _is_nullable(item_type), flexible)
            item_walk, item_min = _NAMESPACE.function(f"item of {name}", item.lines), item.min_size
        return _Field(_call(_array(name, nullable, flexible, item_walk, max(item_min, 1))), 1)
    if dataclasses.is_dataclass(inner):
        walk, min_size = _entity(typing.cast(type[Any], inner))
        if nullable:
            return _Field(_call(_nullable_struct(walk)), 1)
        return _Field(_call(walk), min_size)  # a struct that cannot be null has no marker
    return _primitive(name, kafka_type, nullable, flexible)


def _primitive(name: str, kafka_type: Any, nullable: bool, flexible: bool) -> _Field:
    width = _FIXED_WIDTHS.get(kafka_type) if isinstance(kafka_type, str) else None
    if width is not None:
        return _Field((f"pos += {width}",), width, fixed=True)
    if kafka_type == "string":
        if flexible:
            return _Field(compact_length(name, nullable, MAX_STRING_BYTES), 1)
        return _Field(legacy_length(name, nullable, 2), 2)
    if kafka_type in ("bytes", "records"):
        if flexible:
            return _Field(compact_length(name, nullable, MAX_UVARINT), 1)
        return _Field(legacy_length(name, nullable, 4), 4)
    raise TypeError(f"{name}: no guard for kafka_type {kafka_type!r}")


def _tagged_section(owner: str, known: dict[int, Step]) -> _Field:
    """An empty section (the usual case) is one byte and no call."""
    section = _NAMESPACE.name(_tagged_fields(owner, known))
    return _Field(("if frame[pos]:", f"    pos = {section}(frame, pos, end)", "else:", "    pos += 1"), 1)


def _fold(fields: list[_Field]) -> tuple[str, ...]:
    """The fields' lines in order, consecutive fixed-width fields folded into one addition."""
    lines: list[str] = []
    run = 0
    for part in fields:
        if part.fixed:
            run += part.min_size
            continue
        if run:
            lines.append(f"pos += {run}")
            run = 0
        lines.extend(part.lines)
    if run:
        lines.append(f"pos += {run}")
    return tuple(lines)


def _entity_lines(cls: type[Any]) -> tuple[tuple[str, ...], int]:
    """Lines for every field of a kio entity in wire order, then its tagged fields when flexible."""
    owner = cls.__qualname__
    flexible = bool(getattr(cls, "__flexible__", False))
    hints = typing.get_type_hints(cls)
    fields: list[_Field] = []
    tagged: dict[int, Step] = {}
    for field in dataclasses.fields(cls):
        compiled = _field(owner, field, hints[field.name], flexible)
        tag = field.metadata.get("tag")
        if tag is None:
            fields.append(compiled)
        else:
            tagged[int(tag)] = _NAMESPACE.function(f"{owner} tag {tag}", compiled.lines)
    if flexible:
        fields.append(_tagged_section(owner, tagged))
    return _fold(fields), sum(part.min_size for part in fields)


_ENTITIES: dict[type[Any], tuple[Step, int]] = {}
_REQUESTS: dict[type[Any], Callable[[Frame], int]] = {}


def _entity(cls: type[Any]) -> tuple[Step, int]:
    """The walk of a nested entity (array items, structs) and its smallest size."""
    compiled = _ENTITIES.get(cls)
    if compiled is None:
        lines, min_size = _entity_lines(cls)
        compiled = _ENTITIES[cls] = (_NAMESPACE.function(cls.__qualname__, lines), min_size)
    return compiled


def _header_lines(flexible: bool) -> tuple[str, ...]:
    """Request header v1/v2: key, version, correlation id, then a nullable int16-length client id.

    The client id keeps its int16 length even in the flexible v2 header, as Kafka specifies.
    """
    lines = legacy_length("RequestHeader.client_id", True, 2)
    return (*lines, *_tagged_section("RequestHeader", {}).lines) if flexible else lines


def compile_request(cls: type[Any]) -> Callable[[Frame], int]:
    """``walk(frame) -> offset after the body`` for a kio request class (compiled once per class)."""
    walk = _REQUESTS.get(cls)
    if walk is None:
        header_flexible = bool(getattr(cls.__header_schema__, "__flexible__", False))
        body, _ = _entity_lines(cls)
        lines = (*_header_lines(header_flexible), *body)
        walk = _REQUESTS[cls] = _NAMESPACE.request(cls.__qualname__, lines)
    return walk


def check_request(cls: type[Any], frame: Frame) -> Frame:
    """Refuse ``frame`` (header and body of a ``cls`` request) if any length it declares overruns it;
    the frame kio may read: ``frame`` itself, or a copy without the tagged fields ``cls`` does not know.

    Raises :class:`MalformedRequestError` naming the field; bytes after the body are allowed, as
    Kafka's readers allow them.
    """
    walk = _REQUESTS.get(cls) or compile_request(cls)
    try:
        pos = walk(frame)
    except IndexError:
        _UNKNOWN_TAGS.clear()
        raise MalformedRequestError(f"{cls.__qualname__}: frame ends inside a field") from None
    except BaseException:
        _UNKNOWN_TAGS.clear()
        raise
    if pos > len(frame):
        _UNKNOWN_TAGS.clear()
        raise MalformedRequestError(f"{cls.__qualname__}: fields overrun the frame ({pos} > {len(frame)})")
    if not _UNKNOWN_TAGS:
        return frame
    sections = list(_UNKNOWN_TAGS)
    _UNKNOWN_TAGS.clear()
    return _without_unknown_tags(frame, sections)
