"""The real parts the data-path handlers are given (memory store, topics, producer state, growth
hints), request builders for kio entities, and a batch builder with producer fields."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crc32c
from kio.serial import entity_reader

from kcoord.cluster.file_catalogue import FileCatalogue
from kcoord.cluster.growth_hints import GrowthHints
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.cluster.topic_manager import TopicManager
from kcoord.config import Settings
from kcoord.protocol.codec import RequestHeader, build, encode_entity, request_class, response_class
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import ConnectionInfo, RequestContext
from kcoord.storage import LogStore, open_store
from kcoord.timer.clock import SystemClock

_PREFIX = struct.Struct(">qiib")
_AFTER_CRC = struct.Struct(">hiqqqhii")
TRANSACTIONAL = 0x10


@dataclass
class DataPathApp:
    """The parts of :class:`kcoord.app.App` the data-path handlers are given."""

    settings: Settings
    store: LogStore
    topics: TopicManager
    producers: ProducerStateManager
    clock: SystemClock = field(default_factory=SystemClock)
    node_id: int = 0
    growth_hints: GrowthHints = field(default_factory=lambda: GrowthHints(SystemClock()))
    authorizer: Authorizer = field(default_factory=Authorizer)
    """No authorizer, as kcoord's default; the authorizer's own tests live in tests/security."""


async def make_app(data_dir: Path, **overrides: Any) -> DataPathApp:
    settings = Settings.load(environ={}, flags={"log.dirs": str(data_dir), **overrides})
    store = open_store("memory://", retention_check_interval_ms=0)
    await store.open()
    topics = TopicManager(store, settings, FileCatalogue(store, settings, data_dir))
    await topics.load()
    return DataPathApp(settings, store, topics, ProducerStateManager(data_dir))


def context(api_key: int, version: int) -> RequestContext:
    header = RequestHeader(api_key=api_key, api_version=version, correlation_id=1, client_id="unit")
    return RequestContext(header=header, connection=ConnectionInfo(1, "127.0.0.1", 1))


def request(api_key: int, version: int, body: dict[str, Any]) -> Any:
    cls = request_class(api_key, version)
    assert cls is not None
    return build(cls, body)


def on_the_wire(api_key: int, version: int, body: dict[str, Any]) -> Any:
    """``body`` built into the response entity of ``version``, encoded and decoded again with kio."""
    cls = response_class(api_key, version)
    decoded, _ = entity_reader(cls)(encode_entity(build(cls, body)), 0)
    return decoded


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if not zigzag:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def make_batch(
    values: Sequence[bytes],
    *,
    timestamp_ms: int = 1_700_000_000_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """One uncompressed magic-2 batch with one record per value, all at ``timestamp_ms``."""
    body = bytearray()
    for delta, value in enumerate(values):
        record = (
            b"\x00" + _varint(0) + _varint(delta) + _varint(-1) + _varint(len(value)) + value + _varint(0)
        )
        body += _varint(len(record)) + record
    after_crc = (
        _AFTER_CRC.pack(
            attributes,
            len(values) - 1,
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            len(values),
        )
        + body
    )
    crc = crc32c.crc32c(after_crc)
    return _PREFIX.pack(0, 9 + len(after_crc), -1, 2) + struct.pack(">I", crc) + after_crc
