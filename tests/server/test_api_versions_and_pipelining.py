"""ApiVersions on the wire, and in-order answers to requests pipelined on one connection."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from kcoord.protocol.codec import response_class
from tests.support.raw_client import RawClient
from tests.support.raw_ops import API_VERSIONS, FETCH, FETCH_VERSION, create_topic, fetch_body, parse_fetch
from tests.support.server import KcoordProcess

APIS_EVERY_CLIENT_NEEDS = {0: (0, 9), 1: (4, 12), 2: (1, 7), 3: (0, 12), 18: (0, 4), 19: (2, 4), 22: (0, 4)}
"""key -> (highest minimum, lowest maximum) that PROTOCOL.md section 1.4 asks the server to advertise."""


def api_versions_body(version: int) -> dict[str, Any]:
    return {"client_software_name": "kcoord-tests", "client_software_version": "1.0"} if version >= 3 else {}


def decode_body(version: int, frame: bytes) -> Any:
    """The body after a v0 response header (correlation id only); every byte must be consumed."""
    body, size = entity_reader(response_class(API_VERSIONS, version))(frame, 4)
    assert 4 + size == len(frame), f"{len(frame) - 4 - size} bytes left after the v{version} body"
    return body


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_each_version(shared_kcoord: KcoordProcess, version: int) -> None:
    """ApiVersions v0-v4 each answer error 0 with a response header v0 and the ranges clients need."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        correlation_id = client.send(API_VERSIONS, version, api_versions_body(version))
        frame = client.recv_frame()
    assert struct.unpack_from(">i", frame, 0)[0] == correlation_id
    assert frame[4:6] == b"\x00\x00", "error code right after the correlation id: no header tagged fields"
    body = decode_body(version, frame)
    assert body.error_code == ErrorCode.none
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
    for key, (highest_min, lowest_max) in APIS_EVERY_CLIENT_NEEDS.items():
        low, high = ranges[key]
        assert low <= highest_min and high >= lowest_max, (key, ranges[key])


@pytest.mark.parametrize("version", [3, 4])
def test_flexible_api_versions_writes_no_tagged_fields(shared_kcoord: KcoordProcess, version: int) -> None:
    """Flexible ApiVersions bodies carry only empty tagged-field sections (as kcat's librdkafka needs)."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        client.send(API_VERSIONS, version, api_versions_body(version))
        frame = client.recv_frame()
    count = decode_body(version, frame).api_keys
    # correlation id, error code, compact array length (one byte below 127 entries), entries of
    # key/min/max + an empty tag section, throttle time, the body's empty tag section.
    assert len(count) < 127
    assert len(frame) == 4 + 2 + 1 + len(count) * 7 + 4 + 1
    assert frame[-1:] == b"\x00"
    entries = frame[7 : 7 + len(count) * 7]
    assert all(entries[i + 6] == 0 for i in range(0, len(entries), 7))


def test_fifty_pipelined_requests_answered_in_order(shared_kcoord: KcoordProcess) -> None:
    """Fifty requests sent before any answer is read come back in the order sent, each well formed."""
    versions = [i % 5 for i in range(50)]
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        sent = [client.send(API_VERSIONS, v, api_versions_body(v)) for v in versions]
        for correlation_id, version in zip(sent, versions, strict=True):
            frame = client.recv_frame()
            assert struct.unpack_from(">i", frame, 0)[0] == correlation_id
            assert decode_body(version, frame).error_code == ErrorCode.none


def test_slow_request_holds_back_later_requests(shared_kcoord: KcoordProcess, topic_name: str) -> None:
    """A long-polling Fetch sent first is answered first; the 49 behind it wait for it, as in Kafka."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        assert create_topic(client, topic_name) == 0
        started = time.monotonic()
        fetch_id = client.send(FETCH, FETCH_VERSION, fetch_body(topic_name, 0, 0, max_wait_ms=300))
        later = [client.send(API_VERSIONS, 4, api_versions_body(4)) for _ in range(49)]
        first = client.recv(FETCH, FETCH_VERSION, fetch_id)
        assert time.monotonic() - started >= 0.25
        assert parse_fetch(first).error_code == 0
        for correlation_id in later:
            assert client.recv(API_VERSIONS, 4, correlation_id).error_code == ErrorCode.none
