"""Request frames for fuzzing: valid ones built from kio's schemas with random values, and mutations of them.

Shared by the fuzz tests (hypothesis draws the seeds) and the fuzz bench (a seeded ``random.Random``),
so both send the same kinds of frames: random bytes after a valid header, valid requests, and valid
requests with a length, a byte or the end changed.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import struct
import types
import typing
import uuid
from typing import Any

from kio.serial import entity_writer

from kcoord.protocol.codec import request_class
from tests.support.hostile_frames import request_payload
from tests.support.served import served_apis

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_BOUNDARY_INTS = (-1, 0, 1, 2, 100)


def advertised() -> list[tuple[int, int]]:
    """Every (api key, version) ApiVersions advertises and kio has a request schema for."""
    return [
        (spec.key, version)
        for spec in served_apis()
        for version in range(spec.min_version, spec.max_version + 1)
        if request_class(spec.key, version) is not None
    ]


def _nullable(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _strip_none(annotation: Any) -> Any:
    if _nullable(annotation):
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def _text(rng: random.Random) -> str:
    choice = rng.random()
    if choice < 0.1:
        return ""
    if choice < 0.15:
        return "x" * rng.choice((249, 250, 256, 1000))
    return "".join(rng.choice("abcdefgh-._0123") for _ in range(rng.randint(1, 12)))


def _primitive(kafka_type: str, rng: random.Random) -> Any:
    if kafka_type in _INT_RANGES:
        low, high = _INT_RANGES[kafka_type]
        return rng.choice(_BOUNDARY_INTS) if rng.random() < 0.7 else rng.randint(low, high)
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "string":
        return _text(rng)
    if kafka_type in ("bytes", "records"):
        return rng.randbytes(rng.choice((0, 1, 8, 61, 100)))
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kafka_type == "timedelta_i32":
        return datetime.timedelta(milliseconds=rng.choice((-1, 0, 1, 100, 30_000)))
    if kafka_type == "timedelta_i64":
        return datetime.timedelta(milliseconds=rng.choice((-1, 0, 1, 100, 86_400_000)))
    if kafka_type == "float64":
        return rng.random()
    raise TypeError(f"no generator for kafka_type {kafka_type!r}")


def random_entity(cls: type[Any], rng: random.Random, depth: int = 0) -> Any:
    """A ``cls`` with random values for every field, small arrays, and nulls where the schema allows."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        annotation = hints[field.name]
        if _nullable(annotation) and rng.random() < 0.2:
            values[field.name] = None
            continue
        inner = _strip_none(annotation)
        kafka_type = field.metadata.get("kafka_type", "")
        if typing.get_origin(inner) is tuple:
            item_type = typing.get_args(inner)[0]
            count = rng.choice((0, 1, 1, 2, 3)) if depth < 3 else 0
            values[field.name] = tuple(_item(item_type, kafka_type, rng, depth) for _ in range(count))
        elif dataclasses.is_dataclass(inner):
            values[field.name] = random_entity(typing.cast(type[Any], inner), rng, depth + 1)
        else:
            values[field.name] = _primitive(kafka_type, rng)
    return cls(**values)


def _item(item_type: Any, kafka_type: str, rng: random.Random, depth: int) -> Any:
    if dataclasses.is_dataclass(item_type):
        return random_entity(typing.cast(type[Any], item_type), rng, depth + 1)
    if _nullable(item_type) and rng.random() < 0.2:
        return None
    return _primitive(kafka_type, rng)


def valid_body(api_key: int, version: int, rng: random.Random) -> bytes:
    """The encoded body of a random, schema-valid request."""
    cls = request_class(api_key, version)
    assert cls is not None, (api_key, version)
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, random_entity(cls, rng))
    return buffer.getvalue()


_LENGTH_BOMBS = (
    b"\xff\xff\xff\xff",
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xfe\xff\xff\xff\x0f",
    b"\xff\xff\xff\xff\x0f",
    b"\xff\xff\xff\xff\xff\x01",
    b"\xff\x7f",
    b"\x00",
)


def mutate(body: bytes, rng: random.Random) -> bytes:
    """``body`` with one structural change: a length bomb spliced in, bytes flipped, cut short or extended."""
    choice = rng.randrange(5)
    at = rng.randint(0, len(body))
    if choice == 0:
        bomb = rng.choice(_LENGTH_BOMBS)
        return body[:at] + bomb + body[at + rng.randint(0, len(bomb)) :]
    if choice == 1 and body:
        flipped = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            flipped[rng.randrange(len(flipped))] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF))
        return bytes(flipped)
    if choice == 2:
        return body[:at]
    if choice == 3:
        return body + rng.randbytes(rng.randint(1, 16))
    return rng.randbytes(rng.randint(0, 24))


def fuzz_payload(api_key: int, version: int, rng: random.Random, correlation_id: int = 1) -> bytes:
    """A header of the version's schema and a body that is random, valid or a mutation of a valid one."""
    kind = rng.randrange(4)
    if kind == 0:
        body = rng.randbytes(rng.randint(0, 32))
    elif kind == 1:
        body = valid_body(api_key, version, rng)
    else:
        body = mutate(valid_body(api_key, version, rng), rng)
    return request_payload(api_key, version, body, correlation_id)


def fuzz_frame(api_key: int, version: int, rng: random.Random, correlation_id: int = 1) -> bytes:
    payload = fuzz_payload(api_key, version, rng, correlation_id)
    return struct.pack(">i", len(payload)) + payload
