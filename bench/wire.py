"""Kafka request frames for the raw-protocol benchmarks: kio entities, encoded once, sent many times.

A frame is ``size | api_key | api_version | correlation_id | header rest | body``; the load
generator re-uses one encoded frame per connection and only rewrites the correlation id
(:func:`with_correlation`). Responses are decoded with kio only where the content matters (setup
and the first answer of a phase); afterwards a response is checked by comparing its bytes.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from kcoord.protocol.codec import build, request_class, response_class

API_VERSIONS = 18
CREATE_TOPICS = 19
HEARTBEAT = 12
JOIN_GROUP = 11
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
SYNC_GROUP = 14

_SIZE = struct.Struct(">i")
CORRELATION_OFFSET = 8
"""Byte offset of the correlation id in a size-prefixed request frame."""


def encode_request(
    api_key: int, version: int, body: dict[str, Any], correlation_id: int = 0, client_id: str = "kcoord-bench"
) -> bytes:
    """A size-prefixed request frame for ``body`` (a mapping in kcoord's codec form)."""
    cls = request_class(api_key, version)
    if cls is None:
        raise LookupError(f"kio has no request schema for api {api_key} v{version}")
    header_cls = cls.__header_schema__
    header = header_cls(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header)
    entity_writer(cls)(buffer, build(cls, body))
    payload = buffer.getvalue()
    return _SIZE.pack(len(payload)) + payload


def with_correlation(frame: bytes, correlation_id: int) -> bytes:
    """The same request frame with another correlation id."""
    return frame[:CORRELATION_OFFSET] + correlation_id.to_bytes(4, "big") + frame[CORRELATION_OFFSET + 4 :]


def decode_response(api_key: int, version: int, frame: bytes) -> Any:
    """A response frame (without its size prefix) as a kio entity; ApiVersions' header is always v0."""
    cls = response_class(api_key, version)
    offset = 4
    if cls.__header_schema__.__flexible__:
        offset += 1
    body, _ = entity_reader(cls)(frame, offset)
    return body


def correlation_of(frame: bytes) -> int:
    """The correlation id of a response frame (without its size prefix)."""
    return int.from_bytes(frame[:4], "big")


def call_blocking(
    bootstrap: str, api_key: int, version: int, body: dict[str, Any], timeout: float = 30.0
) -> Any:
    """One request on a fresh blocking socket, for setup (creating a topic, for example)."""
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(encode_request(api_key, version, body, correlation_id=1))
        size = _SIZE.unpack(_recv_exact(sock, 4))[0]
        return decode_response(api_key, version, _recv_exact(sock, size))


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """CreateTopics v4 for one topic; an existing topic is fine."""
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout": 10_000,
    }
    response = call_blocking(bootstrap, CREATE_TOPICS, 4, body)
    code = int(response.topics[0].error_code)
    if code not in (0, 36):  # NONE, TOPIC_ALREADY_EXISTS
        raise RuntimeError(f"CreateTopics {name}: error code {code}")


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("server closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
