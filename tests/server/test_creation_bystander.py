"""Auto-creating thousands of topics does not hold up another connection's heartbeats."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient, decode_response
from tests.support import abuse
from tests.support.server import KcoordProcess

TOPICS = 2_000
PER_REQUEST = 250
BYSTANDER_P99_S = 0.3
"""Generous for a loaded two-core machine; before creation rounds, the flood stalled heartbeats for
as long as a request's topics took to create one catalogue write after another."""


async def _flood(port: int) -> int:
    """Metadata requests naming PER_REQUEST new topics each, one after another; topics created."""
    client = await AsyncRawClient.connect(port, "flood")
    created = 0
    try:
        for first in range(0, TOPICS, PER_REQUEST):
            names = [f"flood-{index:06d}" for index in range(first, first + PER_REQUEST)]
            frame = await asyncio.to_thread(abuse.named_topics_metadata, names, first + 1)
            await client.send_frame(frame)
            raw = await client.recv_frame(within_s=60)
            answer = await asyncio.to_thread(decode_response, ApiKey.METADATA, 12, raw, first + 1)
            created += sum(1 for topic in answer.topics if topic.error_code == 0)
    finally:
        await client.close()
    return created


def test_a_bystander_heartbeats_while_a_client_auto_creates_thousands_of_topics(tmp_path: Path) -> None:
    """While one client auto-creates 2,000 topics through Metadata, a bystander's heartbeat p99 stays
    under 0.3 s and every topic is created."""
    settings = {"kcoord.auto.create.rate": "0", "kcoord.max.partitions.per.request": "1000"}
    server = KcoordProcess(tmp_path / "data", settings).start()
    try:

        async def scenario() -> tuple[int, list[float]]:
            async with abuse.bystander(server.port) as probe:
                created = await _flood(server.port)
            return created, probe.latencies_s

        created, latencies = asyncio.run(asyncio.wait_for(scenario(), 240))
        assert created == TOPICS
        assert len(latencies) > 10
        p99 = abuse.percentile(latencies, 0.99)
        assert p99 < BYSTANDER_P99_S, (
            f"bystander heartbeat p99 {p99 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
        )
    finally:
        server.kill()
