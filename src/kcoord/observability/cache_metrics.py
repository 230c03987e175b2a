"""The PostgreSQL engine's batch cache as Prometheus metrics, read at scrape time.

The cache (:mod:`kcoord.storage.postgres.batch_cache`) keeps plain counters on its hot path; this
collector turns them into ``kcoord_storage_cache_*`` series when scraped, so reading a batch costs
no metrics call and storage imports nothing of Prometheus.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

__all__ = ["CacheCounts", "StorageCacheCollector", "watch_storage_cache"]


class CacheCounts(Protocol):
    """What the collector reads of a batch cache."""

    hits: int
    misses: int
    evictions: int
    size: int
    capacity: int


class StorageCacheCollector(Collector):
    def __init__(self, cache: CacheCounts) -> None:
        self._cache = cache

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        cache = self._cache
        yield CounterMetricFamily(
            "kcoord_storage_cache_hits", "Batch reads served from the PostgreSQL batch cache.", cache.hits
        )
        yield CounterMetricFamily(
            "kcoord_storage_cache_misses",
            "Batch reads the PostgreSQL batch cache did not hold (read from the database).",
            cache.misses,
        )
        yield CounterMetricFamily(
            "kcoord_storage_cache_evictions",
            "Batches pushed out of the PostgreSQL batch cache to stay within its capacity.",
            cache.evictions,
        )
        yield GaugeMetricFamily(
            "kcoord_storage_cache_bytes", "Bytes of batches held in the PostgreSQL batch cache.", cache.size
        )
        yield GaugeMetricFamily(
            "kcoord_storage_cache_capacity_bytes",
            "The PostgreSQL batch cache's budget (kcoord.storage.postgres.cache.bytes).",
            cache.capacity,
        )


def watch_storage_cache(registry: CollectorRegistry, cache: CacheCounts) -> None:
    """Export ``cache``'s counters from ``registry`` (the PostgreSQL engine only)."""
    registry.register(StorageCacheCollector(cache))
