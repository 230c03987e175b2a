"""The listener's limits over real sockets: connections per address, the frame deadline, the request
memory pool, back-pressure on a client that does not read, and limits on what requests create."""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import structlog.testing
from kio.schema.errors import ErrorCode

from kcoord.app import App
from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient, connected, encode_request, running_app

API_VERSIONS = (ApiKey.API_VERSIONS, 0, {})


def _metric(app: App, name: str, **labels: str) -> float:
    value = app.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def _padded_api_versions(correlation_id: int, size: int) -> bytes:
    """A valid ApiVersions v0 request whose frame is ``size`` bytes long (trailing bytes are ignored)."""
    frame = encode_request(*API_VERSIONS, correlation_id, "big")
    body = frame[4:] + bytes(size - len(frame) + 4)
    return struct.pack(">i", len(body)) + body


def _metadata(names: list[str] | None, *, auto_create: bool = True) -> dict[str, Any]:
    return {
        "topics": None if names is None else [{"topic_id": uuid.UUID(int=0), "name": n} for n in names],
        "allow_auto_topic_creation": auto_create,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


async def test_max_connections_per_ip_closes_the_surplus_connection(tmp_path: Path) -> None:
    """A fourth connection from 127.0.0.1 with max.connections.per.ip=3 is closed; a freed slot is reused."""
    async with running_app(tmp_path, **{"max.connections.per.ip": "3"}) as (app, port):
        clients = [await AsyncRawClient.connect(port) for _ in range(3)]
        for client in clients:
            assert (await client.call(*API_VERSIONS)).error_code == ErrorCode.none
        surplus = await AsyncRawClient.connect(port)
        assert await surplus.closed_by_server()
        assert _metric(app, "kcoord_limit_events_total", limit="max.connections.per.ip") >= 1
        await clients.pop().close()
        await asyncio.sleep(0.2)
        async with connected(port) as again:
            assert (await again.call(*API_VERSIONS)).error_code == ErrorCode.none
        for client in clients:
            await client.close()


async def test_an_override_raises_one_address_limit(tmp_path: Path) -> None:
    """max.connections.per.ip.overrides gives 127.0.0.1 its own count above the default."""
    settings = {"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:4"}
    async with running_app(tmp_path, **settings) as (_app, port):
        clients = [await AsyncRawClient.connect(port) for _ in range(4)]
        for client in clients:
            assert (await client.call(*API_VERSIONS)).error_code == ErrorCode.none
        surplus = await AsyncRawClient.connect(port)
        assert await surplus.closed_by_server()
        for client in clients:
            await client.close()


async def test_max_connections_closes_connections_past_the_listener_total(tmp_path: Path) -> None:
    """With max.connections=2 a third connection is closed while two are open."""
    async with running_app(tmp_path, **{"max.connections": "2"}) as (_app, port):
        first, second = await AsyncRawClient.connect(port), await AsyncRawClient.connect(port)
        assert (await second.call(*API_VERSIONS)).error_code == ErrorCode.none
        third = await AsyncRawClient.connect(port)
        assert await third.closed_by_server()
        await first.close()
        await second.close()


async def test_a_frame_that_trickles_in_is_closed_at_its_deadline(tmp_path: Path) -> None:
    """A frame whose body has not arrived kcoord.request.read.timeout.ms after its size closes the
    connection (slowloris), is counted, and a bystander is answered meanwhile."""
    async with running_app(tmp_path, **{"kcoord.request.read.timeout.ms": "500"}) as (app, port):
        slow = await AsyncRawClient.connect(port)
        await slow.send_frame(struct.pack(">i", 1000) + b"\x00" * 10)
        started = time.monotonic()
        async with connected(port) as bystander:
            assert (await bystander.call(*API_VERSIONS)).error_code == ErrorCode.none
            assert await slow.closed_by_server(within_s=10)
            assert time.monotonic() - started >= 0.4
            assert (await bystander.call(*API_VERSIONS)).error_code == ErrorCode.none
        assert _metric(app, "kcoord_limit_events_total", limit="kcoord.request.read.timeout.ms") == 1


async def test_a_large_frame_waits_for_request_memory_without_stalling_small_ones(tmp_path: Path) -> None:
    """With queued.max.request.bytes=1 MiB, a second 800 KB frame waits while the first is held
    half-sent; small requests are still answered; the wait ends when the first connection goes."""
    settings = {"queued.max.request.bytes": str(1 << 20), "kcoord.request.read.timeout.ms": "60000"}
    with structlog.testing.capture_logs() as logs:
        await _a_large_frame_waits(tmp_path, settings)
    assert _limit_lines(logs) == [("queued.max.request.bytes", "127.0.0.1")]


def _limit_lines(logs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(entry["limit"], entry["offender"]) for entry in logs if entry["event"] == "limit.exceeded"]


async def _a_large_frame_waits(tmp_path: Path, settings: dict[str, str]) -> None:
    async with running_app(tmp_path, **settings) as (app, port):
        pool = app.listener.limits.pool
        assert pool is not None
        holder = await AsyncRawClient.connect(port)
        await holder.send_frame(struct.pack(">i", 800_000) + bytes(1000))
        async with connected(port) as waiter, connected(port) as bystander:
            await asyncio.sleep(0.2)
            assert pool.used == 800_000
            await waiter.send_frame(_padded_api_versions(7, 800_000))
            await asyncio.sleep(0.3)
            assert pool.waiting == 1
            assert (await bystander.call(*API_VERSIONS)).error_code == ErrorCode.none
            await holder.close()
            answer = await waiter.recv(ApiKey.API_VERSIONS, 0, 7)
            assert answer.error_code == ErrorCode.none
        await asyncio.sleep(0.1)
        assert pool.used == 0 and pool.waiting == 0
        assert _metric(app, "kcoord_limit_events_total", limit="queued.max.request.bytes") == 1


async def test_a_client_that_does_not_read_stops_being_read(tmp_path: Path) -> None:
    """Pipelining all-topics Metadata without reading: the server stops taking requests once its
    write buffer is full (counted and logged once under socket.send.buffer.bytes), serves a
    bystander meanwhile, and answers everything in order once read."""
    requests = 3_000
    with structlog.testing.capture_logs() as logs:
        await _pipeline_without_reading(tmp_path, requests)
    assert _limit_lines(logs) == [("socket.send.buffer.bytes", "127.0.0.1")]


async def _pipeline_without_reading(tmp_path: Path, requests: int) -> None:
    async with running_app(tmp_path) as (app, port):
        for index in range(200):
            await app.topics.create(f"pressure-{index:03d}", 1)
        hog = await AsyncRawClient.connect(port)
        frames = b"".join(
            encode_request(ApiKey.METADATA, 12, _metadata(None), cid, "hog") for cid in range(1, requests + 1)
        )
        hog.writer.write(frames)

        def answered() -> float:
            return _metric(app, "kcoord_requests_total", api="Metadata", version="12", error="NONE")

        await asyncio.sleep(1.0)
        stalled = answered()
        async with connected(port) as bystander:
            for _ in range(5):
                assert (await bystander.call(*API_VERSIONS)).error_code == ErrorCode.none
        await asyncio.sleep(0.5)
        assert answered() == stalled < requests
        assert _metric(app, "kcoord_limit_events_total", limit="socket.send.buffer.bytes") >= 1
        for cid in range(1, requests + 1):
            head = await asyncio.wait_for(hog.reader.readexactly(8), 30)
            size, correlation_id = struct.unpack(">ii", head)
            assert correlation_id == cid
            await hog.reader.readexactly(size - 4)
        await hog.close()


async def test_frames_over_socket_request_max_bytes_are_counted_and_logged_once(tmp_path: Path) -> None:
    """Two connections from one address declaring frames over socket.request.max.bytes are closed,
    counted twice under that setting and logged once."""
    with structlog.testing.capture_logs() as logs:
        async with running_app(tmp_path, **{"socket.request.max.bytes": "2048"}) as (app, port):
            for _ in range(2):
                client = await AsyncRawClient.connect(port)
                await client.send_frame(struct.pack(">i", 4096) + bytes(16))
                assert await asyncio.wait_for(client.reader.read(1), 10) == b""
                await client.close()
            assert _metric(app, "kcoord_limit_events_total", limit="socket.request.max.bytes") == 2
    assert _limit_lines(logs) == [("socket.request.max.bytes", "127.0.0.1")]


async def test_metadata_auto_creation_stops_at_the_per_request_limit(tmp_path: Path) -> None:
    """A Metadata request naming 50 new topics creates kcoord.max.partitions.per.request of them; the rest
    are answered UNKNOWN_TOPIC_OR_PARTITION and the limit is counted."""
    settings = {"kcoord.max.partitions.per.request": "10", "kcoord.auto.create.rate": "0"}
    async with running_app(tmp_path, **settings) as (app, port), connected(port) as client:
        names = [f"auto-{index:02d}" for index in range(50)]
        answer = await client.call(ApiKey.METADATA, 12, _metadata(names))
        codes = [topic.error_code for topic in answer.topics]
        assert codes == [ErrorCode.none] * 10 + [ErrorCode.unknown_topic_or_partition] * 40
        assert len([n for n in app.topics.names() if n.startswith("auto-")]) == 10
        limit = "kcoord.max.partitions.per.request"
        assert _metric(app, "kcoord_limit_events_total", limit=limit) == 40


async def test_metadata_auto_creation_has_its_own_rate_not_the_mutation_quota(
    tmp_path: Path,
) -> None:
    """kcoord.auto.create.rate=3 lets one Metadata request auto-create three one-partition topics and
    answers UNKNOWN_TOPIC_OR_PARTITION for the rest, counted under that setting, while CreateTopics
    from the same client is not limited by it."""
    settings = {"kcoord.auto.create.rate": "3"}
    async with running_app(tmp_path, **settings) as (app, port), connected(port) as client:
        names = [f"flood-{index:02d}" for index in range(6)]
        answer = await client.call(ApiKey.METADATA, 12, _metadata(names))
        codes = [topic.error_code for topic in answer.topics]
        assert codes == [ErrorCode.none] * 4 + [ErrorCode.unknown_topic_or_partition] * 2
        assert _metric(app, "kcoord_limit_events_total", limit="kcoord.auto.create.rate") == 2
        created = await client.call(ApiKey.CREATE_TOPICS, 7, _create_topics(["admin-1", "admin-2"], 50))
        assert [topic.error_code for topic in created.topics] == [ErrorCode.none, ErrorCode.none]


def _create_topics(names: list[str], partitions: int) -> dict[str, Any]:
    topics = [
        {"name": n, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        for n in names
    ]
    return {"topics": topics, "timeout_ms": 10_000, "validate_only": False}


async def test_create_topics_past_the_mutation_rate_is_throttled(tmp_path: Path) -> None:
    """controller.mutation.rate=2: CreateTopics v7 for three 30-partition topics creates the first (it
    overdraws the bucket, as Kafka's quota lets one request do) and answers THROTTLING_QUOTA_EXCEEDED
    with a throttle time for the others; v5, which predates that error, gets POLICY_VIOLATION."""
    settings = {"controller.mutation.rate": "2"}
    async with running_app(tmp_path, **settings) as (_app, port), connected(port) as client:
        answer = await client.call(ApiKey.CREATE_TOPICS, 7, _create_topics(["q1", "q2", "q3"], 30))
        codes = [(topic.name, topic.error_code) for topic in answer.topics]
        assert codes == [
            ("q1", ErrorCode.none),
            ("q2", ErrorCode.throttling_quota_exceeded),
            ("q3", ErrorCode.throttling_quota_exceeded),
        ]
        assert answer.throttle_time.total_seconds() > 0
        old = await client.call(ApiKey.CREATE_TOPICS, 5, _create_topics(["q4"], 1))
        assert [topic.error_code for topic in old.topics] == [ErrorCode.policy_violation]


async def test_create_topics_past_the_per_request_limit_is_a_policy_violation(tmp_path: Path) -> None:
    """Topics that would take a request past kcoord.max.partitions.per.request get POLICY_VIOLATION."""
    settings = {"kcoord.max.partitions.per.request": "8"}
    async with running_app(tmp_path, **settings) as (_app, port), connected(port) as client:
        answer = await client.call(ApiKey.CREATE_TOPICS, 7, _create_topics(["p1", "p2", "p3"], 4))
        codes = [topic.error_code for topic in answer.topics]
        assert codes == [ErrorCode.none, ErrorCode.none, ErrorCode.policy_violation]


async def test_all_topics_metadata_is_encoded_once_until_the_catalogue_changes(tmp_path: Path) -> None:
    """Repeated all-topics Metadata answers are the same bytes; a new topic appears in the next one."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        for index in range(20):
            await app.topics.create(f"many-{index:03d}", 1)
        first = await client.call(ApiKey.METADATA, 12, _metadata(None))
        second = await client.call(ApiKey.METADATA, 12, _metadata(None))
        assert first.topics == second.topics
        assert len([t for t in first.topics if t.name.startswith("many-")]) == 20
        await app.topics.create("many-new", 1)
        third = await client.call(ApiKey.METADATA, 12, _metadata(None))
        assert "many-new" in {t.name for t in third.topics}
