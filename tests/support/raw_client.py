"""A minimal blocking Kafka protocol client for tests: kio entities over a real socket."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from kcoord.protocol.codec import build, request_class, response_class


class RawClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0, client_id: str = "raw-test") -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def encode(self, api_key: int, version: int, body: dict[str, Any], correlation_id: int) -> bytes:
        cls = request_class(api_key, version)
        assert cls is not None, (api_key, version)
        request = build(cls, body)
        header_cls = cls.__header_schema__
        header = header_cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=self.client_id,
        )
        buf = io.BytesIO()
        entity_writer(header_cls)(buf, header)
        entity_writer(cls)(buf, request)
        payload = buf.getvalue()
        return struct.pack(">i", len(payload)) + payload

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        self._correlation += 1
        self.send_raw(self.encode(api_key, version, body, self._correlation))
        return self._correlation

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def recv(self, api_key: int, version: int, correlation_id: int | None = None) -> Any:
        frame = self.recv_frame()
        cls = response_class(api_key, version)
        (got_correlation,) = struct.unpack_from(">i", frame, 0)
        if correlation_id is not None:
            assert got_correlation == correlation_id
        offset = 4
        if cls.__header_schema__.__flexible__:
            offset += 1  # empty tagged fields of response header v1
        body, size = entity_reader(cls)(frame, offset)
        end = offset + size
        assert end == len(frame), f"{len(frame) - end} trailing bytes"
        return body

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        correlation_id = self.send(api_key, version, body)
        return self.recv(api_key, version, correlation_id)

    def is_closed_by_server(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("server closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)
