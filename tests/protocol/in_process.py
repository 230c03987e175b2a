"""A real kcoord :class:`App` in the test's event loop and an asyncio raw-protocol client for it.

The client encodes requests and decodes responses with kio's schemas of the same (key, version)
and checks what every response must get right: the correlation id, the response header version
(ApiVersions always v0, flexible versions v1) and that the body uses every byte of the frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kio.serial import entity_reader, entity_writer

from kcoord.app import App
from kcoord.config import Settings
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import build, request_class, response_class
from tests.support.server_logs import in_process

_SIZE = struct.Struct(">i")
_HEADER_V1 = struct.Struct(">hhi")


def app_settings(data_dir: Path, **overrides: str) -> Settings:
    """The settings the in-process tests run with: ephemeral loopback ports, no join delay."""
    flags = {
        "listeners": "127.0.0.1:0",
        "kcoord.metrics.listen": "127.0.0.1:0",
        "log.dirs": str(data_dir),
        "group.initial.rebalance.delay.ms": "0",
        **overrides,
    }
    return Settings.load(environ={}, flags=flags)


@asynccontextmanager
async def running_app(
    data_dir: Path, *, store_url: str | None = None, **overrides: str
) -> AsyncIterator[tuple[App, int]]:
    """A started App whose offsets partitions are loaded; yields it and its bound port."""
    with in_process(f"in-process App {data_dir.name}"):
        app = App(app_settings(data_dir, **overrides), store_url=store_url)
        _, port = await app.start()
        try:
            await asyncio.wait_for(app.coordinator.loaded.wait(), 10)
            yield app, port
        finally:
            await app.stop()


def expects_flexible_header(api_key: int, version: int) -> bool:
    """Response header v1 for flexible versions, except ApiVersions, whose header is always v0."""
    cls = request_class(api_key, version)
    assert cls is not None, (api_key, version)
    return api_key != ApiKey.API_VERSIONS and bool(cls.__flexible__)


def encode_request(
    api_key: int, version: int, body: dict[str, Any], correlation_id: int, client_id: str
) -> bytes:
    """A size-prefixed request frame: header of the version's schema, then ``body`` built for ``version``."""
    cls = request_class(api_key, version)
    assert cls is not None, f"kio has no request schema for key {api_key} v{version}"
    request = build(cls, body)
    header_cls = cls.__header_schema__
    header = header_cls(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header)
    entity_writer(cls)(buffer, request)
    payload = buffer.getvalue()
    return _SIZE.pack(len(payload)) + payload


def legacy_header_frame(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A request frame with a hand-made v1 header, for versions kio has no schema for."""
    client_id = b"round-trip"
    payload = (
        _HEADER_V1.pack(api_key, version, correlation_id) + struct.pack(">h", len(client_id)) + client_id
    )
    payload += body
    return _SIZE.pack(len(payload)) + payload


def decode_response(api_key: int, version: int, frame: bytes, correlation_id: int) -> Any:
    """The response body of ``frame``; asserts correlation id, header version and no trailing bytes."""
    (got,) = _SIZE.unpack_from(frame, 0)
    assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
    offset = 4
    if expects_flexible_header(api_key, version):
        assert frame[4:5] == b"\x00", "response header v1 must end with an empty tagged-field section"
        offset = 5
    cls = response_class(api_key, version)
    body, size = entity_reader(cls)(frame, offset)
    trailing = len(frame) - offset - size
    assert trailing == 0, f"{trailing} bytes after the key {api_key} v{version} response body"
    return body


class AsyncRawClient:
    """One connection speaking raw Kafka protocol with kio entities."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id
        self._correlation = 0

    @classmethod
    async def connect(cls, port: int, client_id: str = "round-trip") -> AsyncRawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, client_id)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    async def send_frame(self, frame: bytes) -> None:
        self.writer.write(frame)
        await self.writer.drain()

    async def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        correlation_id = self.next_correlation_id()
        await self.send_frame(encode_request(api_key, version, body, correlation_id, self.client_id))
        return correlation_id

    async def recv_frame(self, within_s: float = 10.0) -> bytes:
        head = await asyncio.wait_for(self.reader.readexactly(4), within_s)
        (size,) = _SIZE.unpack(head)
        return await asyncio.wait_for(self.reader.readexactly(size), within_s)

    async def recv(self, api_key: int, version: int, correlation_id: int, within_s: float = 10.0) -> Any:
        return decode_response(api_key, version, await self.recv_frame(within_s), correlation_id)

    async def call(self, api_key: int, version: int, body: dict[str, Any], within_s: float = 10.0) -> Any:
        correlation_id = await self.send(api_key, version, body)
        return await self.recv(api_key, version, correlation_id, within_s)

    async def closed_by_server(self, within_s: float = 5.0) -> bool:
        """True when the server closes the connection (EOF or reset) within ``within_s`` seconds."""
        try:
            data = await asyncio.wait_for(self.reader.read(1), within_s)
        except ConnectionError:
            return True
        except TimeoutError:
            return False
        return data == b""


@asynccontextmanager
async def connected(port: int, client_id: str = "round-trip") -> AsyncIterator[AsyncRawClient]:
    client = await AsyncRawClient.connect(port, client_id)
    try:
        yield client
    finally:
        await client.close()
