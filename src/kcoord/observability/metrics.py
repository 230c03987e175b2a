"""kcoord's Prometheus metrics: one :class:`KcoordMetrics` (and its own registry) per App.

The names are a contract with the Grafana dashboard (see the metrics contract in the shared
docs). The pure core never touches these objects: the router calls :meth:`observe_request` and
:meth:`observe_exchange`, the logs call :meth:`on_append` / :meth:`on_flush`, the classic groups
report through :class:`kcoord.observability.group_events.GroupEventObserver`, and group and lag
gauges are computed at scrape time by :class:`kcoord.observability.collector.GroupCollector`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import structlog
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kcoord.observability.gc_pauses import GcPauseCollector, GcPauseProbe
from kcoord.observability.loop_lag import LoopLagProbe
from kcoord.observability.loop_metrics import LoopCounter, LoopHistogram, LoopMetricsCollector, RequestStats
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import EncodedResponse
from kcoord.protocol.registry import ApiRegistry

__all__ = ["CONTENT_TYPE_LATEST", "KcoordMetrics"]

log = structlog.get_logger(__name__)

# A ``_created`` sample per counter and histogram child doubles the series for no dashboard
# that reads them (Prometheus ignores them); prometheus_client's switch is process-wide.
disable_created_metrics()  # type: ignore[no-untyped-call]

_REQUEST_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
_REBALANCE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_LOG_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


def _field(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a response mapping or of a kio entity."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


_MAX_COUNTED_ANSWERS = 4096
"""Encoded OffsetCommit answers whose committed-partition count is kept (as many as their cache holds)."""


class KcoordMetrics:
    """The counters and histograms updated as things happen (gauges are collected at scrape)."""

    def __init__(
        self, registry: CollectorRegistry | None = None, api_registry: ApiRegistry | None = None
    ) -> None:
        """``api_registry`` names the APIs in the request metrics (by key when it has no name)."""
        self.registry = registry if registry is not None else CollectorRegistry()
        self._apis = api_registry if api_registry is not None else ApiRegistry()
        self._exchange_counts: dict[int, Callable[[Any, Any], None]] = {
            ApiKey.PRODUCE: self._count_produced,
            ApiKey.FETCH: self._count_fetched,
            ApiKey.OFFSET_COMMIT: self._count_committed,
        }
        self._committed_by_answer: dict[bytes, int] = {}
        r = self.registry
        self.request_stats = RequestStats(_REQUEST_BUCKETS)
        self.observe_request: Callable[[int, int, int, float], None] = self.request_stats.observe
        """``observe_request(api_key, api_version, error, seconds)``: a request was answered (a
        :data:`kcoord.server.router.RequestObserver`; ``error`` an int). Plain counts on the loop,
        exported at scrape time (see :mod:`kcoord.observability.loop_metrics`); the stats' own
        method, so that every request pays one call, not two."""
        self.log_append_duration = LoopHistogram(_LOG_BUCKETS)
        self.log_flush_duration = LoopHistogram(_LOG_BUCKETS)
        self.offset_commits = LoopCounter()
        """Committed partitions: bumped on the loop on every commit, exported at scrape time."""
        self.loop_lag = LoopLagProbe()
        """Started and stopped with the node (see :mod:`kcoord.observability.loop_lag`)."""
        self.gc_pauses = GcPauseProbe()
        """Started and stopped with the node (see :mod:`kcoord.observability.gc_pauses`)."""
        r.register(GcPauseCollector(self.gc_pauses))
        r.register(
            LoopMetricsCollector(
                self.request_stats,
                self.api_name,
                {
                    "kcoord_log_append_duration_seconds": (
                        "Log append latency (until durable under the flush policy).",
                        self.log_append_duration,
                    ),
                    "kcoord_log_flush_duration_seconds": ("fsync latency.", self.log_flush_duration),
                    "kcoord_event_loop_lag_seconds": (
                        "How late the event loop ran a callback due every 10 ms (time it was held).",
                        self.loop_lag.lag,
                    ),
                    "kcoord_event_loop_busy_lag_seconds": (
                        "The part of each event loop lateness the process spent on a CPU (not starved).",
                        self.loop_lag.busy_lag,
                    ),
                },
                {
                    "kcoord_offset_commits": (
                        "Committed partitions (one per partition written).",
                        self.offset_commits,
                    )
                },
            )
        )
        Gauge(
            "kcoord_event_loop_lag_max_seconds",
            "The longest the event loop was held since the node started (the probe's largest lateness).",
            registry=r,
        ).set_function(lambda: self.loop_lag.longest_s)
        Gauge(
            "kcoord_event_loop_busy_lag_max_seconds",
            "The longest event loop lateness the process spent on a CPU since the node started.",
            registry=r,
        ).set_function(lambda: self.loop_lag.longest_busy_s)
        self.rebalances = Counter("kcoord_rebalances", "Rebalances started.", ["trigger"], registry=r)
        self.rebalance_duration = Histogram(
            "kcoord_rebalance_duration_seconds",
            "Rebalance phase durations (join, sync, total).",
            ["phase"],
            buckets=_REBALANCE_BUCKETS,
            registry=r,
        )
        self.produce_bytes = Counter(
            "kcoord_produce_bytes", "Record-batch bytes accepted by Produce.", registry=r
        )
        self.fetch_bytes = Counter("kcoord_fetch_bytes", "Record bytes returned by Fetch.", registry=r)
        self.offsets_load_failures = Counter(
            "kcoord_offsets_partition_load_failures",
            "Loads of an offsets partition that failed (each is retried).",
            ["partition"],
            registry=r,
        )
        self.offsets_append_failures = Counter(
            "kcoord_offsets_append_failures",
            "Appends to an offsets partition that failed (the partition reloads from its log).",
            ["partition"],
            registry=r,
        )
        self.limit_events = Counter(
            "kcoord_limit_events",
            "Connections, frames and creations refused or held back, by the setting that limited them.",
            ["limit"],
            registry=r,
        )
        self.offsets_load_duration = Histogram(
            "kcoord_offsets_partition_load_duration_seconds",
            "Time to replay an offsets partition at start.",
            buckets=_REBALANCE_BUCKETS,
            registry=r,
        )
        self.ownership_moves = Counter(
            "kcoord_ownership_moves",
            "Partitions this cluster node acquired, released, or lost to another node's claim (fenced).",
            ["topic", "change"],
            registry=r,
        )
        self.catalogue_changes = Counter(
            "kcoord_topic_catalogue_changes_applied",
            "Topic catalogue changes other cluster nodes made that this node applied.",
            ["change"],
            registry=r,
        )
        self.lease_losses = Counter(
            "kcoord_lease_losses",
            "Times this cluster node stopped serving because its lease was not renewed in time.",
            registry=r,
        )

    def limit_hit(self, limit: str) -> None:
        """A limit (named by its setting) refused or held back a connection, frame or creation."""
        self.limit_events.labels(limit=limit).inc()

    def watch_request_memory(self, used: Callable[[], float], waiting: Callable[[], float]) -> None:
        """Gauges of the ``queued.max.request.bytes`` pool, read at scrape time."""
        Gauge(
            "kcoord_request_memory_bytes",
            "Bytes of large requests being read or processed (queued.max.request.bytes pool).",
            registry=self.registry,
        ).set_function(used)
        Gauge(
            "kcoord_request_memory_waiting_frames",
            "Frames waiting for request memory (their connections are not read meanwhile).",
            registry=self.registry,
        ).set_function(waiting)

    def watch_shared_state(self, age_s: Callable[[], float | None]) -> None:
        """Cluster mode: how old this node's copy of the shared security state is, read at scrape time."""

        def age() -> float:
            seconds = age_s()
            return math.nan if seconds is None else seconds

        Gauge(
            "kcoord_shared_state_age_seconds",
            "Seconds since this node last read the cluster's ACLs, SCRAM users and group configs; past"
            " kcoord.cluster.state.max.staleness.ms it refuses authorization and logins.",
            registry=self.registry,
        ).set_function(age)

    def exposition(self) -> bytes:
        """The text exposition of everything in the registry (collectors run now)."""
        return generate_latest(self.registry)

    # -- router hooks ------------------------------------------------------------------------

    def api_name(self, api_key: int) -> str:
        spec = self._apis.get(api_key)
        if spec is not None:
            return spec.name
        try:
            return "".join(word.capitalize() for word in ApiKey(api_key).name.split("_"))
        except ValueError:
            return f"Api{api_key}"

    def observe_exchange(self, api_key: int, request: Any, body: Any) -> None:
        """A request and its response body: counts produced, fetched and committed data.

        Runs on every request: an API it does not count costs one dict lookup. A shape it does not
        expect is logged and skipped: metrics never fail a request.
        """
        count = self._exchange_counts.get(api_key)
        if count is None:
            return
        try:
            count(request, body)
        except (TypeError, ValueError, AttributeError):
            log.warning("metrics.exchange_unreadable", api=self.api_name(api_key), exc_info=True)

    def _count_produced(self, request: Any, body: Any) -> None:
        if isinstance(body, EncodedResponse):
            body = body.source
        self.produce_bytes.inc(_accepted_produce_bytes(request, body))

    def _count_fetched(self, request: Any, body: Any) -> None:
        if isinstance(body, EncodedResponse):
            body = body.source
        if body is not None:
            self.fetch_bytes.inc(_fetched_bytes(body))

    def _count_committed(self, request: Any, body: Any) -> None:
        """Partitions committed. A cached encoded answer is counted once: its bytes decide the count."""
        if isinstance(body, EncodedResponse):
            committed = self._committed_by_answer.get(body.body)
            if committed is None:
                if len(self._committed_by_answer) >= _MAX_COUNTED_ANSWERS:
                    self._committed_by_answer.clear()
                committed = self._committed_by_answer[body.body] = _committed_partitions(body.source)
        elif body is None:
            return
        else:
            committed = _committed_partitions(body)
        self.offset_commits.value += committed

    # -- storage hooks (a kcoord.storage.timings.LogTimings) ----------------------------------

    def on_append(self, topic: str, partition: int, size: int, seconds: float) -> None:
        self.log_append_duration.observe(seconds)

    def on_flush(self, topic: str, partition: int, seconds: float) -> None:
        self.log_flush_duration.observe(seconds)

    # -- runtime hooks (a kcoord.runtime.observer.RuntimeObserver) -------------------------------

    def partition_loaded(self, partition: int, records: int, seconds: float) -> None:
        self.offsets_load_duration.observe(seconds)

    def load_failed(self, partition: int) -> None:
        self.offsets_load_failures.labels(partition=str(partition)).inc()

    def append_failed(self, partition: int) -> None:
        self.offsets_append_failures.labels(partition=str(partition)).inc()

    # -- cluster membership hooks (a kcoord.cluster.membership.MembershipObserver) --------------

    def ownership_moved(self, topic: str, partition: int, change: str) -> None:
        self.ownership_moves.labels(topic=topic, change=change).inc()

    def lease_lost(self) -> None:
        self.lease_losses.inc()

    def catalogue_change_applied(self, change: str) -> None:
        """A topic created, deleted, grown or reconfigured by another node (a CatalogueObserver)."""
        self.catalogue_changes.labels(change=change).inc()


def _accepted_produce_bytes(request: Any, body: Any) -> int:
    """Bytes of the batches whose partition answered NONE (all of them for acks=0, no body)."""
    failed: set[tuple[str, int]] = set()
    if body is not None:
        for topic in _field(body, "responses", ()):
            for part in _field(topic, "partition_responses", ()):
                if int(_field(part, "error_code", 0)) != 0:
                    failed.add((str(_field(topic, "name")), int(_field(part, "index"))))
    total = 0
    for topic in _field(request, "topic_data", ()):
        for part in _field(topic, "partition_data", ()):
            if (str(_field(topic, "name")), int(_field(part, "index"))) not in failed:
                total += len(_field(part, "records") or b"")
    return total


def _fetched_bytes(body: Any) -> int:
    return sum(
        len(_field(part, "records") or b"")
        for topic in _field(body, "responses", ())
        for part in _field(topic, "partitions", ())
    )


def _committed_partitions(body: Any) -> int:
    return sum(
        1
        for topic in _field(body, "topics", ())
        for part in _field(topic, "partitions", ())
        if int(_field(part, "error_code", 0)) == 0
    )
