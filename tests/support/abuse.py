"""Abusive clients and a bystander, over loopback, for the resource-exhaustion scenarios of issue 8.

Each attack is bounded in count and time. The bystander is a one-member group that heartbeats every
few milliseconds and records each round trip; :func:`percentile` reads its latencies. Used by the
stress tests (``tests/server/test_abuse.py``) and by ``bench/limits.py``, which prints the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient, decode_response, encode_request
from tests.protocol.request_samples import Scene, heartbeat_sample, join_and_sync

HEARTBEAT_PERIOD_S = 0.005


def percentile(samples: list[float], fraction: float) -> float:
    if not samples:
        return float("inf")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def all_topics_metadata(correlation_id: int) -> bytes:
    body = {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    return encode_request(ApiKey.METADATA, 12, body, correlation_id, "abuse")


def named_topics_metadata(names: list[str], correlation_id: int) -> bytes:
    body = {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": name} for name in names],
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    return encode_request(ApiKey.METADATA, 12, body, correlation_id, "abuse")


@dataclass
class Bystander:
    """A Stable one-member group heartbeating in a loop; ``latencies_s`` of every heartbeat."""

    port: int
    group: str = "bystander"
    latencies_s: list[float] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)
    """``time.monotonic()`` when each heartbeat of ``latencies_s`` was sent."""
    failures: int = 0

    async def run(self, stop: asyncio.Event, joined: threading.Event) -> None:
        client = await AsyncRawClient.connect(self.port, "bystander")
        try:
            scene = Scene(client, 4, self.port, 0, topic="bystander-topic", group=self.group)
            await join_and_sync(scene)
            joined.set()
            while not stop.is_set():
                started = time.perf_counter()
                self.sent_at.append(time.monotonic())
                answer = await client.call(ApiKey.HEARTBEAT, 4, heartbeat_sample(scene), within_s=15)
                self.latencies_s.append(time.perf_counter() - started)
                if answer.error_code != ErrorCode.none:
                    self.failures += 1
                await asyncio.sleep(HEARTBEAT_PERIOD_S)
        finally:
            await client.close()


@contextlib.asynccontextmanager
async def bystander(port: int) -> AsyncIterator[Bystander]:
    """A bystander heartbeating for as long as the block runs, on its own thread and event loop, so
    that the attackers' work in this process does not count against its latency."""
    probe = Bystander(port)
    stop = threading.Event()
    joined = threading.Event()

    def heartbeat_until_stopped() -> None:
        async def main() -> None:
            loop_stop = asyncio.Event()

            async def watch() -> None:
                await asyncio.to_thread(stop.wait)
                loop_stop.set()

            watcher = asyncio.ensure_future(watch())
            await probe.run(loop_stop, joined)
            await watcher

        try:
            asyncio.run(main())
        finally:
            joined.set()

    thread = threading.Thread(target=heartbeat_until_stopped, daemon=True)
    thread.start()
    try:
        await asyncio.to_thread(joined.wait, 30)
        if not thread.is_alive():
            raise RuntimeError("the bystander could not join its group")
        yield probe
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 30)


async def slow_connections(port: int, count: int, hold_s: float) -> int:
    """``count`` connections that each send a frame's size and a few bytes, then nothing; returns
    how many the server closed within ``hold_s``."""
    clients = []
    for _ in range(count):
        with contextlib.suppress(OSError):
            client = await AsyncRawClient.connect(port, "slow")
            client.writer.write(struct.pack(">i", 200) + b"\x00\x03")
            clients.append(client)
    await asyncio.sleep(hold_s)
    closed = 0
    for client in clients:
        if client.reader.at_eof() or await client.closed_by_server(within_s=0.01):
            closed += 1
        await client.close()
    return closed


async def pipelining_non_readers(port: int, connections: int, requests: int, hold_s: float) -> None:
    """``connections`` connections each writing ``requests`` all-topics Metadata requests and reading
    nothing for ``hold_s`` seconds."""
    frame = all_topics_metadata(1)
    clients = [await AsyncRawClient.connect(port, "non-reader") for _ in range(connections)]
    for client in clients:
        client.writer.write(frame * requests)
    await asyncio.sleep(hold_s)
    for client in clients:
        client.writer.transport.abort()


async def unfinished_large_frames(port: int, connections: int, size: int, sent: int, hold_s: float) -> None:
    """``connections`` connections each declaring a ``size``-byte frame and sending ``sent`` bytes of it."""
    clients = [await AsyncRawClient.connect(port, "large") for _ in range(connections)]
    chunk = bytes(1 << 20)

    async def feed(client: AsyncRawClient) -> None:
        client.writer.write(struct.pack(">i", size) + bytes(11))
        remaining = sent
        with contextlib.suppress(ConnectionError):
            while remaining > 0:
                client.writer.write(chunk[: min(remaining, len(chunk))])
                remaining -= len(chunk)
                await client.writer.drain()

    feeders = [asyncio.ensure_future(feed(client)) for client in clients]
    await asyncio.sleep(hold_s)
    for feeder in feeders:
        feeder.cancel()
    await asyncio.gather(*feeders, return_exceptions=True)
    for client in clients:
        client.writer.transport.abort()


async def metadata_for_new_topics(port: int, count: int, within_s: float) -> Any:
    """One Metadata request naming ``count`` new topics; its answer. The request is encoded and the
    answer decoded on a thread, so the bystander sharing this process's event loop is not delayed."""
    names = [f"flood-{index:06d}" for index in range(count)]
    frame = await asyncio.to_thread(named_topics_metadata, names, 1)
    client = await AsyncRawClient.connect(port, "flood")
    try:
        await client.send_frame(frame)
        answer = await client.recv_frame(within_s=within_s)
        return await asyncio.to_thread(decode_response, ApiKey.METADATA, 12, answer, 1)
    finally:
        await client.close()


async def served(port: int, connections: int = 20) -> bool:
    """True when ``connections`` new connections each get an ApiVersions answer."""
    for _ in range(connections):
        client = await AsyncRawClient.connect(port, "after")
        try:
            answer = await client.call(ApiKey.API_VERSIONS, 0, {}, within_s=10)
            if answer.error_code != ErrorCode.none:
                return False
        finally:
            await client.close()
    return True


def rss_bytes(pid: int) -> tuple[int, int]:
    """(current, peak) resident set size of process ``pid`` from /proc."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) * 1024
    return values["VmRSS"], values["VmHWM"]
