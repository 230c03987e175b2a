"""Encode and decode Kafka messages with kio's generated schemas.

Handlers build responses as plain mappings that use the field names of the newest version
(``{"error_code": ..., "topics": [...]}``); :func:`build` turns such a mapping into the kio
entity of the version the client asked for, recursing into nested entities, dropping fields that
version lacks and filling the ones it has but the mapping omits from the schema's defaults. That
keeps one handler per API instead of one per version, as Kafka's generated ``*Data`` classes do.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import struct
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer

from kcoord.protocol.frozen_init import fast_frozen_init
from kcoord.protocol.guard import check_request

__all__ = [
    "EncodedResponse",
    "RequestHeader",
    "build",
    "decode_request",
    "encode_response",
    "peek_api",
    "request_class",
    "response_class",
]

_API_KEY_AND_VERSION = struct.Struct(">hh")
_CORRELATION_ID = struct.Struct(">i")
_SIZE_AND_CORRELATION_ID = struct.Struct(">ii")
_TAGGED_FIELDS_NONE = b"\x00"


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The request header fields every version shares (v1 and v2; v0 is not accepted)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_api(frame: bytes | memoryview) -> tuple[int, int, int]:
    """API key, version and correlation id of a frame, without decoding the rest."""
    if len(frame) < 8:
        raise ValueError("request frame shorter than its header")
    api_key, api_version = _API_KEY_AND_VERSION.unpack_from(frame, 0)
    (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 4)
    return api_key, api_version, correlation_id


def _load(path: str) -> type[Any]:
    module_name, _, class_name = path.partition(":")
    cls: type[Any] = getattr(importlib.import_module(module_name), class_name)
    return cls


@cache
def request_class(api_key: int, api_version: int) -> type[Any] | None:
    """The kio request entity for (key, version), or None if kio has no such schema."""
    name = api_key_map.get(api_key)
    versions = schema_name_map.get(name) if name else None
    entry = versions.get(api_version) if versions else None
    if entry is None:
        return None
    paths = dict(entry.items())
    return _load(next(p for k, p in paths.items() if k.name == "request"))


@cache
def response_class(api_key: int, api_version: int) -> type[Any]:
    """The kio response entity for (key, version)."""
    name = api_key_map[api_key]
    entry = schema_name_map[name][api_version]
    return _load(next(p for k, p in entry.items() if k.name == "response"))


_READERS: dict[type[Any], Callable[[Any, int], tuple[Any, int]]] = {}
_WRITERS: dict[type[Any], Callable[[Any, Any], None]] = {}
_PLANS: dict[type[Any], tuple[_FieldPlan, ...]] = {}


def _body_reader(cls: type[Any]) -> Callable[[Any, int], tuple[Any, int]]:
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = entity_reader(cls)
    return reader


def _writer(cls: type[Any]) -> Callable[[Any, Any], None]:
    writer = _WRITERS.get(cls)
    if writer is None:
        writer = _WRITERS[cls] = entity_writer(cls)
    return writer


def decode_request(frame: bytes | memoryview) -> tuple[RequestHeader, Any]:
    """Decode header and body of one request frame.

    Raises ``LookupError`` when no schema exists for the key/version and ``ValueError`` (or one of
    kio's decode errors) when the bytes do not parse; the connection layer decides what to do.
    The guard checks every declared length first: kio's native reader trusts them (see guard.py).
    Tagged fields the schema does not know are skipped, as Kafka's readers skip them.
    """
    api_key, api_version, _ = peek_api(frame)
    cls = request_class(api_key, api_version)
    if cls is None:
        raise LookupError(f"no schema for api_key={api_key} version={api_version}")
    frame = check_request(cls, frame)  # without the tagged fields kio does not know (it would raise)
    header_cls = cls.__header_schema__
    raw_header, offset = _body_reader(header_cls)(frame, 0)
    body, size = _body_reader(cls)(frame, offset)
    end = offset + size
    if end > len(frame):
        raise ValueError(f"request body overruns its frame ({end} > {len(frame)})")
    # Bytes after the body are ignored, as Kafka's generated readers do: librdkafka 2.16 sends
    # three of them after an all-topics Metadata request.
    header = RequestHeader(
        api_key=api_key,
        api_version=api_version,
        correlation_id=int(raw_header.correlation_id),
        client_id=raw_header.client_id,
    )
    return header, body


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Size-prefixed response frame; the header version follows the schema (ApiVersions is always v0)."""
    buffer = io.BytesIO()
    buffer.write(b"\x00\x00\x00\x00")
    buffer.write(_CORRELATION_ID.pack(correlation_id))
    header_cls = type(response).__header_schema__
    if getattr(header_cls, "__flexible__", False):
        buffer.write(_TAGGED_FIELDS_NONE)
    _writer(type(response))(buffer, response)
    frame = buffer.getbuffer()
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    return bytes(frame)


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body encoded once and sent many times (ApiVersions): only the header varies."""

    body: bytes
    flexible_header: bool
    error_code: ErrorCode = ErrorCode.none
    """The first error the body carries (what the router logs); NONE when it carries none."""
    source: Any = field(default=None, compare=False)
    """The body this was encoded from, for observers that read responses (None for fixed answers)."""
    _size: int = field(init=False, repr=False, compare=False)
    _tail: bytes = field(init=False, repr=False, compare=False)
    """The frame after the correlation id: the header's empty tagged fields (if flexible), the body."""

    def __post_init__(self) -> None:
        tail = _TAGGED_FIELDS_NONE + self.body if self.flexible_header else self.body
        object.__setattr__(self, "_tail", tail)
        object.__setattr__(self, "_size", _CORRELATION_ID.size + len(tail))

    @classmethod
    def of(cls, response: Any) -> EncodedResponse:
        error = getattr(response, "error_code", ErrorCode.none)
        return cls(encode_entity(response), bool(type(response).__header_schema__.__flexible__), error)

    def frame(self, correlation_id: int) -> bytes:
        """The size-prefixed response frame: only the correlation id is written per request."""
        return _SIZE_AND_CORRELATION_ID.pack(self._size, correlation_id) + self._tail


def encode_entity(entity: Any) -> bytes:
    """The bytes of one kio entity, without any header (used for nested payloads and tests)."""
    buffer = io.BytesIO()
    _writer(type(entity))(buffer, entity)
    return buffer.getvalue()


Converter = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


def _to_timedelta(value: Any) -> Any:
    if isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    return value


def _to_error_code(value: Any) -> Any:
    if isinstance(value, ErrorCode):
        return value
    return ErrorCode(int(value))


def _to_datetime(value: Any) -> Any:
    if isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
    return value


_KAFKA_TYPE_CONVERTERS: dict[str, Converter] = {
    "timedelta_i32": _to_timedelta,
    "timedelta_i64": _to_timedelta,
    "error_code": _to_error_code,
    "datetime_i64": _to_datetime,
}


def _entity_type(annotation: Any) -> tuple[type[Any] | None, bool]:
    """(nested entity class, is_array) for a field annotation, or (None, False) for primitives."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        return _entity_type(non_none[0]) if len(non_none) == 1 else (None, False)
    if origin is tuple and args and dataclasses.is_dataclass(args[0]):
        return typing.cast(type[Any], args[0]), True
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return annotation, False
    return None, False


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    convert: Converter
    required: bool
    fallback: Any


def _plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    cached = _PLANS.get(cls)
    if cached is None:
        cached = _PLANS[cls] = _make_plan(cls)
    return cached


def _make_plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans: list[_FieldPlan] = []
    for f in dataclasses.fields(cls):
        nested, is_array = _entity_type(hints[f.name])
        kafka_type = f.metadata.get("kafka_type", "")
        convert: Converter
        if nested is not None and is_array:
            convert = _array_converter(nested)
        elif nested is not None:
            convert = _entity_converter(nested)
        else:
            convert = _KAFKA_TYPE_CONVERTERS.get(kafka_type, _identity)
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        # Error codes and durations the schema gives no default get NONE and 0; a schema default
        # (JoinGroup's rebalance_timeout of -1, CreateTopics' timeout of 60 s) is kept.
        fallback: Any = None
        if not has_default and kafka_type == "error_code":
            fallback, has_default = ErrorCode.none, True
        elif not has_default and kafka_type in ("timedelta_i32", "timedelta_i64"):
            fallback, has_default = datetime.timedelta(0), True
        plans.append(_FieldPlan(f.name, convert, not has_default, fallback))
    return tuple(plans)


def _array_converter(nested: type[Any]) -> Converter:
    def convert(items: Any) -> Any:
        if items is None:
            return None
        return tuple(build(nested, item) for item in items)

    return convert


def _entity_converter(nested: type[Any]) -> Converter:
    def convert(value: Any) -> Any:
        return None if value is None else build(nested, value)

    return convert


_ABSENT = object()


def build(cls: type[Any], data: Mapping[str, Any] | Any) -> Any:
    """Make a ``cls`` instance from a version-neutral mapping or object (see the module docstring).

    ``data`` may be a mapping or any object with attributes of the same names (the core's
    dataclasses), so a response the core returns can often be passed on unchanged.
    """
    if isinstance(data, cls):
        return data
    kwargs: dict[str, Any] = {}
    is_mapping = isinstance(data, Mapping)
    for plan in _plan(cls):
        value = data.get(plan.name, _ABSENT) if is_mapping else getattr(data, plan.name, _ABSENT)
        if value is not _ABSENT:
            kwargs[plan.name] = plan.convert(value)
        elif plan.fallback is not None:
            kwargs[plan.name] = plan.fallback
        elif plan.required:
            raise KeyError(f"{cls.__module__}.{cls.__qualname__} needs field {plan.name!r}")
    return cls(**kwargs)
