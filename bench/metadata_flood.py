"""Topic auto-creation at scale: topics created per second and a bystander's heartbeats meanwhile.

Per run, a kcoord of its own (``--set`` settings apply) with ``kcoord.auto.create.rate`` 0 (no limit) and
``kcoord.max.partitions.per.request`` = ``--metadata-flood-per-request``, so neither quota is what
is measured, and a descriptor limit of ``--metadata-flood-nofile`` (400,000) or the hard limit if
lower: with the file engine each partition keeps three files open, so under a hard limit of 20,000
about 6,000 topics are created before ``kcoord.descriptors.reserved`` refuses the rest (``--set
kcoord.storage.url=memory://`` keeps no file per partition). One client sends Metadata v12
requests, one after another, each naming ``--metadata-flood-per-request`` (1,000) new topics with
auto-creation on, until ``--metadata-flood-topics`` (100,000) are named. A bystander (a one-member
group on its own thread and event loop) heartbeats every 5 ms throughout.

Reported: topics created and created per second (first request to last answer), the bystander's
heartbeat p50/p99/max, the server's peak RSS, and from the server's own loop-lag probe
(``kcoord_event_loop_lag_seconds``, scraped before and after the flood) its longest stall during the
flood and how many stalls passed 50 ms, and the same for the "busy" part of each stall (the part the
server spent on a CPU, ``kcoord_event_loop_busy_lag_seconds``): what the server's own work held up,
not the time a loaded machine did not schedule it, so less sensitive to the rest of a shared machine
than the bystander's percentiles. Also the server's garbage-collection pauses
(``kcoord_gc_pause_seconds``): the longest during the flood, how many passed 50 ms, and the longest
busy part of one (its CPU time, as for the loop's stalls). This process's
own collector is off during the flood (:func:`_collector_off`), so that its pauses do not count as
the server's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families

from group_formation import metrics_address
from report import Measurement
from server import BenchServer, running_kcoord

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.protocol.in_process import AsyncRawClient, decode_response
from tests.support import abuse

from kcoord.protocol.api_keys import ApiKey

DESCRIPTION = "Metadata naming many new topics (auto-creation): topics/s and a bystander's heartbeat p99"
MIB = 1 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("metadata_flood")
    group.add_argument("--metadata-flood-topics", type=int, default=100_000, help="topics to create")
    group.add_argument("--metadata-flood-per-request", type=int, default=1000, help="new topics per request")
    group.add_argument("--metadata-flood-nofile", type=int, default=400_000, help="server descriptor limit")


def _descriptor_limit(count: int) -> Callable[[], None]:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY:
        count = min(count, hard)

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))

    return apply


async def _flood(port: int, topics: int, per_request: int) -> tuple[int, float]:
    """(topics created, seconds taken) by Metadata requests of ``per_request`` new names each."""
    client = await AsyncRawClient.connect(port, "flood")
    created = 0
    started = time.monotonic()
    try:
        for first in range(0, topics, per_request):
            names = [f"flood-{index:07d}" for index in range(first, min(topics, first + per_request))]
            correlation_id = first // per_request + 1
            frame = await asyncio.to_thread(abuse.named_topics_metadata, names, correlation_id)
            await client.send_frame(frame)
            raw = await client.recv_frame(within_s=600)
            answer = await asyncio.to_thread(decode_response, ApiKey.METADATA, 12, raw, correlation_id)
            created += sum(1 for topic in answer.topics if topic.error_code == 0)
    finally:
        await client.close()
    return created, time.monotonic() - started


class LoopLag(NamedTuple):
    """One of the server's loop-lag histograms at one scrape: the longest lateness so far, and the
    counts by bucket bound."""

    longest_s: float
    buckets: dict[float, float]
    """Cumulative counts by upper bound (``le``)."""


LAG_FAMILIES = {"loop stall": "kcoord_event_loop_lag", "busy stall": "kcoord_event_loop_busy_lag"}
"""Figure name -> metric prefix: every lateness, and the part the server spent on a CPU."""
GC_FIGURE = "gc pause"
"""The garbage collector's pauses (``kcoord_gc_pause_seconds``), reported as the stalls are."""
GC_BUSY_FIGURE = "gc busy pause"
"""The longest part of a collection's pause spent on a CPU (``kcoord_gc_pause_busy_max_seconds``)."""


def _loop_lag(metrics: str) -> dict[str, LoopLag]:
    """The loop-lag figures, as ``GC_FIGURE`` the collector's pauses (every generation summed, the
    longest of any) from ``kcoord_gc_pause_seconds``, and as ``GC_BUSY_FIGURE`` the longest busy one."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=30) as response:
        text = response.read().decode()
    found = {figure: LoopLag(0.0, {}) for figure in (*LAG_FAMILIES, GC_FIGURE, GC_BUSY_FIGURE)}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for figure, prefix in LAG_FAMILIES.items():
                if sample.name == f"{prefix}_max_seconds":
                    found[figure] = found[figure]._replace(longest_s=sample.value)
                elif sample.name == f"{prefix}_seconds_bucket":
                    found[figure].buckets[float(sample.labels["le"])] = sample.value
            if sample.name == "kcoord_gc_pause_busy_max_seconds":
                busy = found[GC_BUSY_FIGURE]
                found[GC_BUSY_FIGURE] = busy._replace(longest_s=max(busy.longest_s, sample.value))
            gc_pauses = found[GC_FIGURE]
            if sample.name == "kcoord_gc_pause_max_seconds":
                found[GC_FIGURE] = gc_pauses._replace(longest_s=max(gc_pauses.longest_s, sample.value))
            elif sample.name == "kcoord_gc_pause_seconds_bucket":
                bound = float(sample.labels["le"])
                gc_pauses.buckets[bound] = gc_pauses.buckets.get(bound, 0.0) + sample.value
    return found


def _stall_figures(before: LoopLag, after: LoopLag) -> tuple[float, float]:
    """(longest stall during the flood in ms, stalls over 50 ms). The longest is the probe's own
    figure when it grew during the flood, else the bound of the highest bucket the flood reached."""
    grown = {bound: after.buckets[bound] - before.buckets.get(bound, 0.0) for bound in after.buckets}
    over_50ms = grown.get(float("inf"), 0.0) - grown.get(0.05, 0.0)
    if after.longest_s > before.longest_s:
        return after.longest_s * 1000, over_50ms
    total = grown.get(float("inf"), 0.0)
    reached = min((bound for bound, count in grown.items() if count >= total), default=0.0)
    return reached * 1000, over_50ms


@contextmanager
def _collector_off() -> Iterator[None]:
    """This process's garbage collector off (and what it holds frozen) while the flood runs.

    The bystander heartbeats from a thread of this process, and a collection here stops it as a
    server stall would: decoding the 1,000-topic answers set off full collections of this process's
    heap, 9 of them of 100-280 ms in one flood (``gc.callbacks`` timer), counted as the server's
    heartbeat latency. What the flood allocates here is freed by reference counting.
    """
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


async def _one_run(server: BenchServer, options: argparse.Namespace) -> dict[str, float]:
    port = int(server.bootstrap.rpartition(":")[2])
    metrics = metrics_address(server)
    async with abuse.bystander(port) as probe:
        before = await asyncio.to_thread(_loop_lag, metrics)
        with _collector_off():
            created, seconds = await _flood(
                port, options.metadata_flood_topics, options.metadata_flood_per_request
            )
        after = await asyncio.to_thread(_loop_lag, metrics)
    latencies = probe.latencies_s
    stalls: dict[str, float] = {}
    for figure in (*LAG_FAMILIES, GC_FIGURE):
        longest_ms, over_50ms = _stall_figures(before[figure], after[figure])
        stalls[f"{figure} max"] = longest_ms
        stalls[f"{figure}s > 50 ms"] = over_50ms
    stalls[f"{GC_BUSY_FIGURE} max"] = _stall_figures(before[GC_BUSY_FIGURE], after[GC_BUSY_FIGURE])[0]
    print(f"  {created:,} topics in {seconds:.1f} s, {len(latencies):,} bystander heartbeats", flush=True)
    return {
        "topics created": created,
        "topics/s": created / seconds,
        "heartbeat p50": abuse.percentile(latencies, 0.5) * 1000,
        "heartbeat p99": abuse.percentile(latencies, 0.99) * 1000,
        "heartbeat max": max(latencies, default=float("inf")) * 1000,
        "peak rss": abuse.rss_bytes(server.pid)[1] / MIB,
        **stalls,
    }


def run(given: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    settings = {
        **given.settings,
        "kcoord.auto.create.rate": "0",
        "kcoord.max.partitions.per.request": str(options.metadata_flood_per_request),
        "group.initial.rebalance.delay.ms": "0",
    }
    runs: list[dict[str, float]] = []
    for _ in range(options.runs):
        limit = _descriptor_limit(options.metadata_flood_nofile)
        with running_kcoord(settings, preexec_fn=limit) as server:
            runs.append(asyncio.run(_one_run(server, options)))
    units = {
        "topics created": "topics",
        "topics/s": "topics/s",
        "peak rss": "MiB",
        "loop stalls > 50 ms": "stalls",
        "busy stalls > 50 ms": "stalls",
        "gc pauses > 50 ms": "pauses",
    }
    return [
        Measurement(metric, units.get(metric, "ms"), tuple(run[metric] for run in runs)) for metric in runs[0]
    ]
