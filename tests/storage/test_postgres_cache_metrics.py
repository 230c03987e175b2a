"""The PostgreSQL batch cache's counters as Prometheus series: reading cold data moves the miss
counter, appends past the budget move the eviction counter, and a node's /metrics shows them."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.observability.cache_metrics import watch_storage_cache
from kcoord.storage import LogConfig
from kcoord.storage.postgres import PostgresLogStore
from tests.support.postgres import PostgresCluster
from tests.support.server import KcoordProcess

from .helpers import T0_MS, BatchBuilder

SMALL = LogConfig(segment_bytes=600, index_interval_bytes=100)
NAMES = (
    "kcoord_storage_cache_hits_total",
    "kcoord_storage_cache_misses_total",
    "kcoord_storage_cache_evictions_total",
    "kcoord_storage_cache_bytes",
    "kcoord_storage_cache_capacity_bytes",
)


def samples(text: str) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("kcoord_storage_cache_")
    }


def scraped(registry: CollectorRegistry) -> dict[str, float]:
    return samples(generate_latest(registry).decode())


async def test_cold_reads_move_the_miss_counter_and_appends_the_evictions(
    postgres_cluster: PostgresCluster, make_batch: BatchBuilder
) -> None:
    """A store opened on data it never cached misses on every read; a tiny budget evicts."""
    database = postgres_cluster.create_database()
    warm = PostgresLogStore(database, SMALL, retention_check_interval_ms=0, log_cleaner_backoff_ms=0)
    await warm.open()
    try:
        log = await warm.create("t", 0)
        for i in range(20):
            await log.append(make_batch([bytes([i]) * 30, b"x"], timestamps=[T0_MS + i] * 2))
    finally:
        await warm.close()
    cold = PostgresLogStore(
        database, SMALL, retention_check_interval_ms=0, log_cleaner_backoff_ms=0, cache_bytes=300
    )
    await cold.open()
    registry = CollectorRegistry()
    watch_storage_cache(registry, cold.cache)
    try:
        before = scraped(registry)
        assert before["kcoord_storage_cache_misses_total"] == 0
        cold_log = cold.get("t", 0)
        assert cold_log is not None
        for offset in range(0, 40, 4):
            assert await cold_log.read_async(offset, 100)
        after = scraped(registry)
        assert after["kcoord_storage_cache_misses_total"] > 0
        assert after["kcoord_storage_cache_evictions_total"] > 0
        assert 0 < after["kcoord_storage_cache_bytes"] <= 300
        assert after["kcoord_storage_cache_capacity_bytes"] == 300
        assert after["kcoord_storage_cache_hits_total"] == cold.cache.hits
    finally:
        await cold.close()


def test_a_node_on_postgresql_exports_the_cache_series(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """``/metrics`` of a node over PostgreSQL has every ``kcoord_storage_cache_*`` series."""
    database = postgres_cluster.create_database()
    node = kcoord_factory(tmp_path / "node", {"kcoord.storage.url": database}).start()
    with urllib.request.urlopen(f"http://{node.metrics_address}/metrics", timeout=10) as response:
        found = samples(response.read().decode())
    assert set(NAMES) <= set(found)
