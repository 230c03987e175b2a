"""Issue 8's resource-exhaustion scenarios against a kcoord subprocess whose descriptor limit is 4,096:
slow connections, clients that pipeline without reading, unfinished 100 MB frames and a Metadata
request naming 100,000 new topics. The server's memory stays under its documented bound, a bystander
keeps heartbeating, and new connections are served afterwards.

Latency bounds here are generous (they fail on starvation, not on a busy machine); the exact
figures come from ``python bench/run.py limits``.
"""

from __future__ import annotations

import asyncio
import resource
from pathlib import Path

import pytest

from tests.support import abuse
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.stress

NOFILE = 4096
MIB = 1 << 20
QUEUED_MAX_REQUEST_BYTES = 100 * MIB
MEMORY_BOUND = 200 * MIB + QUEUED_MAX_REQUEST_BYTES
"""README "Limits": baseline (under 200 MiB with 50 offsets partitions loaded) plus the request pool."""
STARVATION_P99_S = 1.5
STARVATION_MAX_S = 5.0
"""Before fairness, twenty pipelining clients stalled the bystander for 9.6 s; a loaded two-core CI
machine shows a p99 of a few hundred milliseconds without any starvation."""


def _not_starved(latencies: list[float]) -> None:
    assert latencies, "the bystander got no heartbeat answered"
    p99, worst = abuse.percentile(latencies, 0.99), max(latencies)
    assert p99 < STARVATION_P99_S and worst < STARVATION_MAX_S, f"p99 {p99:.3f} s, max {worst:.3f} s"


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def _server(tmp_path: Path) -> KcoordProcess:
    settings = {
        "kcoord.request.read.timeout.ms": "2000",
        "queued.max.request.bytes": str(QUEUED_MAX_REQUEST_BYTES),
        "kcoord.max.partitions.per.request": "200",
    }
    return KcoordProcess(tmp_path / "data", settings, preexec_fn=_limit_descriptors).start()


def test_slow_connections_do_not_slow_a_bystander(tmp_path: Path) -> None:
    """500 connections that stop mid-frame are closed at the frame deadline; a bystander's heartbeats
    keep their latency and new connections are served afterwards."""
    server = _server(tmp_path)
    try:

        async def scenario() -> tuple[int, list[float]]:
            async with abuse.bystander(server.port) as probe:
                closed = await abuse.slow_connections(server.port, 500, hold_s=4.0)
            assert await abuse.served(server.port)
            return closed, probe.latencies_s

        closed, latencies = asyncio.run(asyncio.wait_for(scenario(), 50))
        assert closed == 500
        _not_starved(latencies)
    finally:
        server.kill()


def test_flooding_clients_leave_memory_bounded_and_the_bystander_served(tmp_path: Path) -> None:
    """Twenty connections pipelining 10,000 all-topics Metadata requests without reading, ten sending
    95 MB of a 100 MB frame, and one Metadata request naming 100,000 new topics, all at once: the peak
    RSS stays under the documented bound, the bystander heartbeats throughout, the flood creates at
    most kcoord.max.partitions.per.request topics (200 here, to keep the test short; 1,000 by
    default), and afterwards new connections are served."""
    server = _server(tmp_path)
    try:
        assert server.proc is not None
        pid = server.proc.pid

        async def scenario() -> tuple[list[float], object]:
            async with abuse.bystander(server.port) as probe:
                flood = asyncio.ensure_future(abuse.metadata_for_new_topics(server.port, 100_000, 40))
                await asyncio.gather(
                    abuse.pipelining_non_readers(server.port, 20, 10_000, hold_s=6.0),
                    abuse.unfinished_large_frames(server.port, 10, 100_000_000, 95_000_000, hold_s=6.0),
                )
                answer = await flood
            assert await abuse.served(server.port)
            return probe.latencies_s, answer

        latencies, answer = asyncio.run(asyncio.wait_for(scenario(), 55))
        _, peak = abuse.rss_bytes(pid)
        assert peak < MEMORY_BOUND, f"peak RSS {peak / MIB:.0f} MiB"
        _not_starved(latencies)
        created = [t for t in answer.topics if t.error_code == 0]  # type: ignore[attr-defined]
        assert 0 < len(created) <= 200
        assert server.proc.poll() is None
    finally:
        server.kill()


def test_auto_creation_stops_before_the_descriptors_run_out(tmp_path: Path) -> None:
    """Under RLIMIT_NOFILE 600 with 300 descriptors reserved, a Metadata request naming 2,000 new
    topics creates only what the budget allows, and new connections are still served afterwards."""
    settings = {"kcoord.descriptors.reserved": "300", "kcoord.max.partitions.per.request": "5000"}

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (600, 600))

    server = KcoordProcess(tmp_path / "data", settings, preexec_fn=limit).start()
    try:

        async def scenario() -> object:
            answer = await abuse.metadata_for_new_topics(server.port, 2000, 50)
            assert await abuse.served(server.port, connections=100)
            return answer

        answer = asyncio.run(asyncio.wait_for(scenario(), 55))
        created = [t for t in answer.topics if t.error_code == 0]  # type: ignore[attr-defined]
        assert 0 < len(created) < 100
        assert server.events("limit.exceeded")[0]["limit"] == "kcoord.descriptors.reserved"
    finally:
        server.kill()
