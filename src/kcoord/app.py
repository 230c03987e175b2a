"""The composition root: builds kcoord's parts in order and stops them in reverse.

Start: identity -> log store -> topics -> group coordinator -> Kafka listener -> HTTP endpoint.
Stop (SIGTERM): stop accepting, drain in-flight requests for a bounded time, stop the
coordinator, flush and close the logs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from kcoord.broker.growth_hints import GrowthHints
from kcoord.broker.identity import load_or_create_identity
from kcoord.broker.producer_state import ProducerStateManager
from kcoord.broker.topic_configs import log_config_for
from kcoord.broker.topic_manager import TopicChange, TopicEvent, TopicManager
from kcoord.config import Settings
from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.service import GroupCoordinator
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.observability.endpoint import build_endpoint
from kcoord.observability.group_events import GroupEventObserver
from kcoord.observability.http import HttpEndpoint
from kcoord.observability.metrics import KcoordMetrics
from kcoord.server.listener import Listener
from kcoord.server.router import Router
from kcoord.storage import LogStore, open_store
from kcoord.timer.api import Timer
from kcoord.timer.clock import SystemClock

log = structlog.get_logger(__name__)


def _load_api_modules() -> None:
    """Import every API module so that it registers its handler (and so ApiVersions lists it)."""
    from kcoord import apis  # noqa: F401


class App:
    def __init__(self, settings: Settings, *, store_url: str | None = None) -> None:
        _load_api_modules()
        self.settings = settings
        self.clock = SystemClock()
        self.data_dir = Path(settings["log.dirs"]).resolve()
        self._store_url = store_url or f"file://{self.data_dir}"
        self.node_id = 0
        self.cluster_id = ""
        self.store: LogStore
        self.topics: TopicManager
        self.producers: ProducerStateManager
        self.coordinator: GroupCoordinator
        self.growth_hints = GrowthHints(self.clock)
        self.router = Router(self)
        self.metrics = KcoordMetrics()
        self.group_events = GroupEventObserver(self.metrics)
        self.router.observers.append(self.metrics.observe_request)
        self.router.exchange_observers.append(self.metrics.observe_exchange)
        self.http: HttpEndpoint | None = None
        self.listener: Listener | None = None
        self.advertised: tuple[str, int] = ("127.0.0.1", 9092)
        self.started = asyncio.Event()

    async def start(self) -> tuple[str, int]:
        """Start everything; returns the Kafka address actually bound."""
        s = self.settings
        identity = load_or_create_identity(self.data_dir, s["node.id"])
        self.node_id, self.cluster_id = identity.node_id, identity.cluster_id
        self.store = open_store(
            self._store_url,
            log_config_for({}, s),
            clock=self.clock,
            retention_check_interval_ms=s["log.retention.check.interval.ms"],
            log_cleaner_backoff_ms=s["log.cleaner.backoff.ms"],
        )
        self.store.timings = self.metrics
        await self.store.open()
        self.topics = TopicManager(self.store, s, self.data_dir)
        await self.topics.load()
        self.producers = ProducerStateManager(self.data_dir)
        self.coordinator = GroupCoordinator(
            self.topics,
            self.clock,
            self._new_shard,
            num_partitions=s["offsets.topic.num.partitions"],
            expiry_interval_ms=s["offsets.retention.check.interval.ms"],
            append_timeout_ms=s["offsets.commit.timeout.ms"],
            observer=self.metrics,
        )
        await self.coordinator.start()
        self.topics.add_listener(self._on_topic_event)
        host, port = s["listeners"]
        self.listener = Listener(
            self.router,
            host,
            port,
            max_request_bytes=s["socket.request.max.bytes"],
            max_in_flight=s["queued.max.requests"],
            idle_timeout_s=s["connections.max.idle.ms"] / 1000,
        )
        bound = await self.listener.start()
        advertised = s["advertised.listeners"]
        if advertised is None:
            advertised = ("127.0.0.1" if bound[0] in ("0.0.0.0", "::") else bound[0], bound[1])
        self.advertised = advertised
        metrics_host, metrics_port = s["kcoord.metrics.listen"]
        self.http = build_endpoint(self, self.metrics, metrics_host, metrics_port)
        metrics_bound = await self.http.start()
        log.info(
            "kcoord.started",
            listen=f"{bound[0]}:{bound[1]}",
            metrics=f"{metrics_bound[0]}:{metrics_bound[1]}",
            advertised=f"{advertised[0]}:{advertised[1]}",
            node_id=self.node_id,
            cluster_id=self.cluster_id,
            data_dir=str(self.data_dir),
        )
        self.started.set()
        return bound

    def _new_shard(self, partition: int, timer: Timer) -> GroupCoordinatorShard:
        s = self.settings
        return GroupCoordinatorShard(
            timer,
            classic_config=ClassicGroupConfig(
                min_session_timeout_ms=s["group.min.session.timeout.ms"],
                max_session_timeout_ms=s["group.max.session.timeout.ms"],
                initial_rebalance_delay_ms=s["group.initial.rebalance.delay.ms"],
                max_size=s["group.max.size"],
                fast_failover=s["kcoord.fast.failover.enable"],
            ),
            offset_metadata_max_bytes=s["offset.metadata.max.bytes"],
            offsets_retention_ms=s["offsets.retention.minutes"] * 60_000,
            topic_exists=self._topic_partition_exists,
            observer=self.group_events,
        )

    def _on_topic_event(self, event: TopicEvent) -> None:
        if event.change is TopicChange.PARTITIONS_ADDED:
            self.growth_hints.topic_grew(event.topic.name)
            self.coordinator.partitions_added(event.topic.name)

    def _topic_partition_exists(self, topic: str, partition: int) -> bool:
        info = self.topics.get(topic)
        return info is not None and 0 <= partition < info.partitions

    async def stop(self) -> None:
        """Stop accepting, drain in-flight requests (bounded), then flush and close the logs."""
        if self.listener is not None:
            await self.listener.stop_accepting()
            self.listener.stop_reading()
        await self.coordinator.stop()
        if self.listener is not None:
            await self.listener.drain(self.settings["kcoord.shutdown.timeout.ms"] / 1000)
        await self.store.close()
        if self.http is not None:
            await self.http.stop()
        log.info("kcoord.stopped")
