"""Memory of ``postgresql://`` nodes over a database far larger than what each one serves.

Per run: a fresh database in a throwaway PostgreSQL (``tests/support/postgres.py``) is filled from
this process (``--storage-memory-partitions`` partitions of topic ``bulk``, ``--storage-memory-mb``
MB of 256 KiB batches in all, written through the engine itself). Then, one after the other:

- **one node** (no cluster) serving every partition: its RSS once started;
- **three nodes** with ``kcoord.cluster.enable``, each owning a third of the partitions: each node's
  RSS and peak RSS (``VmHWM``) once the partitions are spread, then after a confluent-kafka
  consumer has fetched the whole topic from them (every byte cold: read from the database), and the
  rate of that fetch.

Every node runs with ``kcoord.storage.postgres.cache.bytes`` = ``--storage-memory-cache-mb``. With
``--storage-memory-pythonpath DIR`` the nodes run kcoord from another source tree (a checkout of an
earlier commit, which has no such setting), for before/after figures on the same machine. The
section's own server is not used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from report import Measurement
from server import BenchServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from tests.support.batches import build_batch
from tests.support.cluster_nodes import cluster_settings, cluster_status, wait_until
from tests.support.postgres import PostgresCluster
from tests.support.server import KcoordProcess

from kcoord.storage import LogConfig
from kcoord.storage.postgres import PostgresLogStore

DESCRIPTION = "RSS of postgresql:// nodes (1 serving all, 3 sharing) over a larger database; cold fetch"
TOPIC = "bulk"
BATCH_BYTES = 256 << 10
RECORD_BYTES = 64 << 10
FETCH_TIMEOUT_S = 180.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("storage_memory")
    group.add_argument("--storage-memory-mb", type=int, default=480, help="MB in the database (480)")
    group.add_argument("--storage-memory-partitions", type=int, default=12, help="partitions (12)")
    group.add_argument("--storage-memory-cache-mb", type=int, default=32, help="batch cache per node (32)")
    group.add_argument("--storage-memory-pythonpath", default="", help="run the nodes from this src dir")


async def _fill(url: str, partitions: int, total_bytes: int) -> int:
    """Append ``total_bytes`` of batches spread over the partitions; return how many records."""
    store = PostgresLogStore(url, LogConfig(), retention_check_interval_ms=0, log_cleaner_backoff_ms=0)
    await store.open()
    try:
        logs = [await store.create(TOPIC, partition) for partition in range(partitions)]
        per_batch = BATCH_BYTES // RECORD_BYTES
        batches = total_bytes // BATCH_BYTES
        now = int(time.time() * 1000)
        for start in range(0, batches, partitions):
            round_ = [
                logs[i % partitions].append(
                    build_batch([(None, os.urandom(RECORD_BYTES))] * per_batch, timestamp_ms=now)
                )
                for i in range(start, min(start + partitions, batches))
            ]
            await asyncio.gather(*round_)
        return batches * per_batch
    finally:
        await store.close()


def _memory_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in KiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def _mib(kib: int) -> float:
    return kib / 1024


@contextlib.contextmanager
def _nodes(
    root: Path, database: str, count: int, options: argparse.Namespace
) -> Iterator[list[KcoordProcess]]:
    saved = os.environ.get("PYTHONPATH")
    if options.storage_memory_pythonpath:
        os.environ["PYTHONPATH"] = options.storage_memory_pythonpath
    cache = str(options.storage_memory_cache_mb << 20)
    nodes: list[KcoordProcess] = []
    try:
        for n in range(1, count + 1):
            settings = (
                cluster_settings(database, n)
                if count > 1
                else {"kcoord.storage.url": database, "offsets.topic.num.partitions": "12"}
            )
            if not options.storage_memory_pythonpath:
                settings["kcoord.storage.postgres.cache.bytes"] = cache
            nodes.append(KcoordProcess(root / f"node{n}", settings).start(timeout=120))
        yield nodes
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        for node in nodes:
            node.kill()


def _pid(node: KcoordProcess) -> int:
    assert node.proc is not None
    return node.proc.pid


def _spread(nodes: list[KcoordProcess], partitions: int) -> None:
    """Wait until every partition of the topic is served by one of the nodes."""

    def settled() -> bool:
        owned = 0
        for node in nodes:
            status = cluster_status(node)
            entries = status["partitions"].get(TOPIC, [])
            owned = max(owned, sum(1 for e in entries if e["owner"] is not None))
        return owned == partitions and all(cluster_status(n)["serving"] for n in nodes)

    wait_until(settled, 120, "topic partitions spread over the nodes")
    time.sleep(2.0)  # one more renewal: every claimed partition's index is loaded


def _consume_all(bootstrap: str, partitions: int, records: int) -> float:
    """Fetch every record of the topic from the beginning; the MB/s of record values."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"storage-memory-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 8 << 20,
            "max.partition.fetch.bytes": 2 << 20,
            "log_level": 3,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
        seen = 0
        started = time.perf_counter()
        deadline = time.monotonic() + FETCH_TIMEOUT_S
        while seen < records and time.monotonic() < deadline:
            for message in consumer.consume(1000, 1.0):
                if message.error() is None:
                    seen += 1
        took = time.perf_counter() - started
        if seen < records:
            raise RuntimeError(f"fetched {seen} of {records} records in {FETCH_TIMEOUT_S} s")
        return seen * RECORD_BYTES / 1e6 / took
    finally:
        consumer.close()


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    partitions = options.storage_memory_partitions
    cluster = PostgresCluster().start()
    single: list[float] = []
    start_rss: list[float] = []
    start_peak: list[float] = []
    loaded_rss: list[float] = []
    loaded_peak: list[float] = []
    rate: list[float] = []
    try:
        for number in range(options.runs):
            database = cluster.create_database("memory")
            records = asyncio.run(_fill(database, partitions, options.storage_memory_mb * 1_000_000))
            with tempfile.TemporaryDirectory(prefix="kcoord-memory-") as root:
                with _nodes(Path(root) / "single", database, 1, options) as (node,):
                    time.sleep(2.0)
                    single.append(_mib(_memory_kib(_pid(node))[0]))
                with _nodes(Path(root) / "cluster", database, 3, options) as nodes:
                    _spread(nodes, partitions)
                    started = [_memory_kib(_pid(node)) for node in nodes]
                    print(
                        f"  run {number + 1}: one node {single[-1]:.0f} MiB; three nodes at start"
                        f" {', '.join(f'{_mib(r):.0f}' for r, _ in started)} MiB"
                        f" (peak {', '.join(f'{_mib(p):.0f}' for _, p in started)})",
                        flush=True,
                    )
                    rate.append(_consume_all(nodes[0].bootstrap, partitions, records))
                    loaded = [_memory_kib(_pid(node)) for node in nodes]
            start_rss.append(_mib(max(rss for rss, _ in started)))
            start_peak.append(_mib(max(peak for _, peak in started)))
            loaded_rss.append(_mib(max(rss for rss, _ in loaded)))
            loaded_peak.append(_mib(max(peak for _, peak in loaded)))
            print(
                f"  run {number + 1}: {options.storage_memory_mb} MB in {partitions} partitions;"
                f" three nodes after fetching all {', '.join(f'{_mib(r):.0f}' for r, _ in loaded)} MiB"
                f" (peak {', '.join(f'{_mib(p):.0f}' for _, p in loaded)}); cold fetch {rate[-1]:.1f} MB/s",
                flush=True,
            )
    finally:
        cluster.stop()
    return [
        Measurement("one node serving all: RSS after start", "MiB", tuple(single)),
        Measurement("3 nodes: largest RSS after start", "MiB", tuple(start_rss)),
        Measurement("3 nodes: largest peak RSS at start", "MiB", tuple(start_peak)),
        Measurement("3 nodes: largest RSS after fetching all", "MiB", tuple(loaded_rss)),
        Measurement("3 nodes: largest peak RSS after fetching all", "MiB", tuple(loaded_peak)),
        Measurement("cold fetch of the whole topic", "MB/s", tuple(rate)),
    ]
