"""Bad input over real sockets: the offender gets an error or is disconnected, the server logs it, and a
bystander connected at the same time keeps producing and fetching on an unbroken connection."""

from __future__ import annotations

import random
import struct
import time
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from tests.support.batches import build_batch, corrupt_crc
from tests.support.raw_client import RawClient
from tests.support.raw_ops import (
    API_VERSIONS,
    FETCH,
    FETCH_VERSION,
    create_topic,
    fetch,
    fetch_body,
    produce,
)
from tests.support.server import KcoordProcess
from tests.support.watch import Bystander, LogWatch

DEFAULT_MAX_REQUEST_BYTES = 104857600


@pytest.fixture
def bystander(shared_kcoord: KcoordProcess, topic_name: str) -> Iterator[Bystander]:
    """A well-behaved client that round-trips a record before the offence (and, in the test, after it)."""
    watcher = Bystander(shared_kcoord, f"{topic_name}-bystander")
    watcher.round_trip()
    try:
        yield watcher
    finally:
        watcher.close()


def assert_unharmed(server: KcoordProcess, bystander: Bystander) -> None:
    bystander.round_trip()
    assert server.proc is not None and server.proc.poll() is None, "the server process died"


def _now() -> int:
    return int(time.time() * 1000)


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A frame with request header v1 (non-flexible) and ``body`` as is."""
    client_id = b"bad-input"
    payload = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id + body
    return struct.pack(">i", len(payload)) + payload


def test_bad_crc_is_corrupt_message(
    shared_kcoord: KcoordProcess, topic_name: str, bystander: Bystander
) -> None:
    """A batch whose CRC does not match is refused with CORRUPT_MESSAGE and logged; nothing is appended."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        assert create_topic(client, topic_name) == 0
        logs = LogWatch(shared_kcoord)
        batch = corrupt_crc(build_batch([(b"k", b"v")], timestamp_ms=_now()))
        error, _ = produce(client, topic_name, 0, batch)
        assert error == ErrorCode.corrupt_message
        logs.wait_for_mention("corrupt_message")
        assert fetch(client, topic_name, 0, 0).high_watermark == 0
        good_error, base_offset = produce(
            client, topic_name, 0, build_batch([(b"k", b"v")], timestamp_ms=_now())
        )
        assert (good_error, base_offset) == (0, 0), "the offender's connection stays usable"
    assert_unharmed(shared_kcoord, bystander)


def test_fetch_unknown_topic(shared_kcoord: KcoordProcess, topic_name: str, bystander: Bystander) -> None:
    """A Fetch of a topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION and is logged."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        logs = LogWatch(shared_kcoord)
        assert fetch(client, f"{topic_name}-missing", 0, 0).error_code == ErrorCode.unknown_topic_or_partition
        logs.wait_for_mention("unknown_topic_or_partition")
    assert_unharmed(shared_kcoord, bystander)


def test_produce_unknown_partition(
    shared_kcoord: KcoordProcess, topic_name: str, bystander: Bystander
) -> None:
    """A Produce to a partition the topic does not have answers UNKNOWN_TOPIC_OR_PARTITION and is logged."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        assert create_topic(client, topic_name, partitions=1) == 0
        logs = LogWatch(shared_kcoord)
        error, _ = produce(client, topic_name, 7, build_batch([(b"k", b"v")], timestamp_ms=_now()))
        assert error == ErrorCode.unknown_topic_or_partition
        logs.wait_for_mention("unknown_topic_or_partition")
    assert_unharmed(shared_kcoord, bystander)


def test_fetch_out_of_range_offset(
    shared_kcoord: KcoordProcess, topic_name: str, bystander: Bystander
) -> None:
    """A Fetch past the log end answers OFFSET_OUT_OF_RANGE with the high watermark, and is logged."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        assert create_topic(client, topic_name) == 0
        assert produce(client, topic_name, 0, build_batch([(b"k", b"v")] * 3, timestamp_ms=_now())) == (0, 0)
        logs = LogWatch(shared_kcoord)
        fetched = fetch(client, topic_name, 0, 100)
        assert fetched.error_code == ErrorCode.offset_out_of_range
        assert fetched.records == b""
        logs.wait_for_mention("offset_out_of_range")
    assert_unharmed(shared_kcoord, bystander)


@pytest.mark.parametrize("name", ["bad/name", "a" * 250, "..", "spaces are bad"])
def test_create_topic_bad_name(shared_kcoord: KcoordProcess, bystander: Bystander, name: str) -> None:
    """CreateTopics with an illegal name answers INVALID_TOPIC_EXCEPTION and is logged."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        logs = LogWatch(shared_kcoord)
        assert create_topic(client, name) == ErrorCode.invalid_topic_exception
        logs.wait_for_mention("invalid_topic_exception")
    assert_unharmed(shared_kcoord, bystander)


def test_create_topic_replication_factor_3(
    shared_kcoord: KcoordProcess, topic_name: str, bystander: Bystander
) -> None:
    """CreateTopics with replication factor 3 on a single node answers INVALID_REPLICATION_FACTOR, logged."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        logs = LogWatch(shared_kcoord)
        assert create_topic(client, topic_name, replication_factor=3) == ErrorCode.invalid_replication_factor
        logs.wait_for_mention("invalid_replication_factor")
        assert fetch(client, topic_name, 0, 0).error_code == ErrorCode.unknown_topic_or_partition
    assert_unharmed(shared_kcoord, bystander)


def test_unsupported_api_versions_version(shared_kcoord: KcoordProcess, bystander: Bystander) -> None:
    """ApiVersions v99 gets UNSUPPORTED_VERSION in a v0 body behind response header v0, and is logged."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        logs = LogWatch(shared_kcoord)
        client.send_raw(request_frame(API_VERSIONS, 99, 4242))
        frame = client.recv_frame()
        correlation_id, error_code, count = struct.unpack_from(">ihi", frame, 0)
        assert correlation_id == 4242
        assert error_code == ErrorCode.unsupported_version
        assert len(frame) == 10 + 6 * count, "v0 body: int32 array of (key, min, max), nothing more"
        ranges = {key: (low, high) for key, low, high in struct.iter_unpack(">hhh", frame[10:])}
        assert ranges[API_VERSIONS] == (0, 4)
        logs.wait_for_mention("unsupported_version")
        assert client.call(API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})
    assert_unharmed(shared_kcoord, bystander)


def test_frame_larger_than_request_max_bytes(shared_kcoord: KcoordProcess, bystander: Bystander) -> None:
    """A size prefix above socket.request.max.bytes closes the connection unread, with a log line."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        logs = LogWatch(shared_kcoord)
        client.send_raw(struct.pack(">i", DEFAULT_MAX_REQUEST_BYTES + 1) + b"\x00" * 64)
        assert client.is_closed_by_server()
        logs.wait_for_mention("socket.request.max.bytes")
    assert_unharmed(shared_kcoord, bystander)


def test_negative_frame_size(shared_kcoord: KcoordProcess, bystander: Bystander) -> None:
    """A negative size prefix closes the connection with a log line."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        logs = LogWatch(shared_kcoord)
        client.send_raw(struct.pack(">i", -2) + b"\x00" * 16)
        assert client.is_closed_by_server()
        logs.wait_for_mention("negative")
    assert_unharmed(shared_kcoord, bystander)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_bytes(shared_kcoord: KcoordProcess, bystander: Bystander, seed: int) -> None:
    """Random bytes behind a plausible size prefix, and random bytes alone, both close the connection."""
    garbage = random.Random(seed).randbytes(300)
    framed = struct.pack(">i", len(garbage)) + garbage
    for payload in (framed, garbage):
        with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
            logs = LogWatch(shared_kcoord)
            client.send_raw(payload)
            assert client.is_closed_by_server(), f"connection left open after {payload[:8].hex()}..."
            logs.wait_for_mention("connection.closed_bad_request")
    assert_unharmed(shared_kcoord, bystander)


def test_frame_cut_off_then_closed(shared_kcoord: KcoordProcess, bystander: Bystander) -> None:
    """A frame that stops midway before the client closes its socket is logged as cut off."""
    logs = LogWatch(shared_kcoord)
    client = RawClient(shared_kcoord.host, shared_kcoord.port)
    whole = client.encode(FETCH, FETCH_VERSION, fetch_body("whatever", 0, 0), 1)
    client.send_raw(whole[: len(whole) // 2])
    time.sleep(0.1)
    client.close()
    logs.wait_for_mention("cut off")
    assert_unharmed(shared_kcoord, bystander)


def test_unknown_api_key_closes_connection(shared_kcoord: KcoordProcess, bystander: Bystander) -> None:
    """A request with an API key the server does not know closes the connection with a log line."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        logs = LogWatch(shared_kcoord)
        client.send_raw(request_frame(9999, 0, 7, b"\x00" * 8))
        assert client.is_closed_by_server()
        logs.wait_for_mention("unknown api key", "9999")
    assert_unharmed(shared_kcoord, bystander)
