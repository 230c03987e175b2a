"""Issue 8's resource-exhaustion scenarios, timed: a bystander's heartbeat latency under attack.

Per run, a kcoord of its own whose descriptor limit is ``--limits-nofile`` (4,096), with
``kcoord.request.read.timeout.ms=2000``, ``kcoord.max.partitions.per.request=--limits-created``
(200: at the default 1,000 the flood request spends minutes creating topics on a loaded machine, each
topic's logs and catalogue being made durable) and the defaults otherwise (``queued.max.request.bytes``
100 MiB, ``kcoord.auto.create.rate`` 100 for the flood's auto-creation). A bystander (a
one-member group on its own thread and event loop) heartbeats every 5 ms throughout; its p50, p99
and worst latency are reported for each phase:

- ``quiet``: the bystander alone for ``--limits-quiet-seconds`` (3 s);
- ``slow``: ``--limits-slow-connections`` (500) connections that stop mid-frame (closed at the
  frame deadline);
- ``flood``: twenty connections pipelining 10,000 all-topics Metadata requests each without reading,
  ten connections each sending 95 MB of a 100 MB frame (for 6 s), and one Metadata request naming
  100,000 new topics (until it is answered).

Also reported: the server's peak RSS (VmHWM) and whether twenty new connections are served after
the flood. Heartbeat latency ratios against ``quiet`` are within one run, so a loaded machine
affects both sides.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from report import Measurement
from server import BenchServer, running_kcoord

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import abuse

DESCRIPTION = "a bystander's heartbeats under slow, flooding and non-reading clients (RLIMIT_NOFILE 4,096)"
MIB = 1 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("limits")
    group.add_argument("--limits-nofile", type=int, default=4096, help="server descriptor limit (4,096)")
    group.add_argument("--limits-quiet-seconds", type=float, default=3.0, help="quiet phase (3 s)")
    group.add_argument("--limits-slow-connections", type=int, default=500, help="slow connections (500)")
    group.add_argument("--limits-flood-topics", type=int, default=100_000, help="topics named (100,000)")
    group.add_argument("--limits-non-readers", type=int, default=20, help="non-reading connections (20)")
    group.add_argument("--limits-pipelined", type=int, default=10_000, help="requests each pipelines")
    group.add_argument("--limits-large-frames", type=int, default=10, help="unfinished 100 MB frames (10)")
    group.add_argument("--limits-created", type=int, default=200, help="partitions one request may create")


def _descriptor_limit(count: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))

    return apply


async def _phase(port: int, attack: Callable[[], Any]) -> list[float]:
    async with abuse.bystander(port) as probe:
        await attack()
    return probe.latencies_s


async def _one_run(server: BenchServer, options: argparse.Namespace) -> dict[str, float]:
    port = int(server.bootstrap.rpartition(":")[2])
    figures: dict[str, float] = {}

    async def quiet() -> None:
        await asyncio.sleep(options.limits_quiet_seconds)

    async def slow() -> None:
        await abuse.slow_connections(port, options.limits_slow_connections, hold_s=4.0)

    async def flood() -> None:
        flooding = asyncio.ensure_future(
            abuse.metadata_for_new_topics(port, options.limits_flood_topics, 120)
        )
        await asyncio.gather(
            abuse.pipelining_non_readers(port, options.limits_non_readers, options.limits_pipelined, 6.0),
            abuse.unfinished_large_frames(port, options.limits_large_frames, 100_000_000, 95_000_000, 6.0),
        )
        await flooding

    for name, attack in (("quiet", quiet), ("slow", slow), ("flood", flood)):
        latencies = await _phase(port, attack)
        figures[f"{name} p50"] = abuse.percentile(latencies, 0.5) * 1000
        figures[f"{name} p99"] = abuse.percentile(latencies, 0.99) * 1000
        figures[f"{name} max"] = max(latencies, default=float("inf")) * 1000
    figures["served after"] = 1.0 if await abuse.served(port) else 0.0
    figures["peak rss"] = abuse.rss_bytes(server.pid)[1] / MIB
    return figures


def run(_server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    runs: list[dict[str, float]] = []
    settings = {
        "kcoord.request.read.timeout.ms": "2000",
        "group.initial.rebalance.delay.ms": "0",
        "kcoord.max.partitions.per.request": str(options.limits_created),
    }
    for _ in range(options.runs):
        with running_kcoord(settings, preexec_fn=_descriptor_limit(options.limits_nofile)) as server:
            runs.append(asyncio.run(_one_run(server, options)))
    measurements = []
    for metric in runs[0]:
        unit = "MiB" if metric == "peak rss" else "1 = yes" if metric == "served after" else "ms"
        label = f"heartbeat {metric}" if unit == "ms" else metric
        measurements.append(Measurement(label, unit, tuple(run[metric] for run in runs)))
    for phase in ("slow", "flood"):
        ratio = tuple(run[f"{phase} p99"] / run["quiet p99"] for run in runs)
        measurements.append(Measurement(f"heartbeat p99 {phase} / quiet", "ratio", ratio))
    return measurements
