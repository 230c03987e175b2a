"""The composition root: builds kcoord's parts with their dependencies, starts them in order and
stops them in reverse.

Build: identity, log store, topics, producer state, group coordinator and its service, every API
(registered here and nowhere else), router, listener, HTTP endpoint.
Start: log store -> topics -> producer state (rebuilt from the logs) -> group coordinator -> Kafka
listener -> HTTP endpoint.
Stop (SIGTERM): stop accepting, drain in-flight requests for a bounded time, stop the
coordinator, snapshot producer state, flush and close the logs.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import structlog

from kcoord.apis.broker import (
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
from kcoord.apis.groups import (
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from kcoord.apis.groups.common import MemberWatch
from kcoord.cluster.growth_hints import GrowthHints
from kcoord.cluster.identity import Node, load_or_create_identity
from kcoord.cluster.membership import ClusterMembership, LeaseSettings, LogOnlyHost, MembershipDirectory
from kcoord.cluster.producer_snapshots import ProducerSnapshots
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.cluster.topic_configs import log_config_for
from kcoord.cluster.topic_manager import TopicChange, TopicEvent, TopicManager
from kcoord.cluster.topic_names import INTERNAL_TOPICS
from kcoord.config import Settings
from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.observability.endpoint import build_endpoint
from kcoord.observability.group_events import GroupEventObserver
from kcoord.observability.metrics import KcoordMetrics
from kcoord.protocol.registry import ApiRegistry
from kcoord.runtime.group_service import GroupService
from kcoord.runtime.service import OFFSETS_TOPIC, GroupCoordinator
from kcoord.server.listener import Listener
from kcoord.server.router import Router
from kcoord.storage import open_store
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.ownership import Ownership
from kcoord.timer.api import Timer
from kcoord.timer.clock import SystemClock

log = structlog.get_logger(__name__)

DEFAULT_ADVERTISED = ("127.0.0.1", 9092)


class App:
    """Every part of one kcoord node, built with its dependencies; :meth:`start` opens and binds them.

    Construction reads (or creates) the node's identity in the data directory and wires the parts;
    nothing listens and no log is opened until :meth:`start`.
    """

    def __init__(self, settings: Settings, *, store_url: str | None = None) -> None:
        s = self.settings = settings
        self.clock = SystemClock()
        self.data_dir = Path(s["log.dirs"]).resolve()
        identity = load_or_create_identity(self.data_dir, s["node.id"])
        self.node = Node(
            identity.node_id, identity.cluster_id, s["advertised.listeners"] or DEFAULT_ADVERTISED
        )
        self.registry = ApiRegistry()
        self.metrics = KcoordMetrics(api_registry=self.registry)
        self.group_events = GroupEventObserver(self.metrics)
        self.store = open_store(
            store_url or s["kcoord.storage.url"] or f"file://{self.data_dir}",
            log_config_for({}, s),
            clock=self.clock,
            retention_check_interval_ms=s["log.retention.check.interval.ms"],
            log_cleaner_backoff_ms=s["log.cleaner.backoff.ms"],
        )
        self.store.timings = self.metrics
        self.topics = TopicManager(self.store, s, self.data_dir, shared=s["kcoord.cluster.enable"])
        self.producers = ProducerStateManager(self.data_dir)
        self.producer_snapshots = ProducerSnapshots(
            self.data_dir, self.store, self.producers, internal_topics=INTERNAL_TOPICS
        )
        self.growth_hints = GrowthHints(self.clock)
        self.coordinator = GroupCoordinator(
            self.topics,
            self.clock,
            self._new_shard,
            num_partitions=s["offsets.topic.num.partitions"],
            expiry_interval_ms=s["offsets.retention.check.interval.ms"],
            append_timeout_ms=s["offsets.commit.timeout.ms"],
            observer=self.metrics,
            owned_only=s["kcoord.cluster.enable"],
            serving=self._serving,
        )
        self.membership: ClusterMembership | None = None
        """Set at start when ``kcoord.cluster.enable``: this node's lease and owned partitions."""
        if s["kcoord.cluster.enable"] and not isinstance(self.store, PostgresLogStore):
            raise ValueError("kcoord.cluster.enable needs a postgresql:// kcoord.storage.url")
        self.groups = GroupService(self.coordinator)
        self._register_apis()
        self.router = Router(self.registry)
        self.router.observers.append(self.metrics.observe_request)
        self.router.exchange_observers.append(self.metrics.observe_exchange)
        host, port = s["listeners"]
        self.listener = Listener(
            self.router,
            host,
            port,
            max_request_bytes=s["socket.request.max.bytes"],
            idle_timeout_s=s["connections.max.idle.ms"] / 1000,
        )
        metrics_host, metrics_port = s["kcoord.metrics.listen"]
        self.http = build_endpoint(
            self.coordinator,
            self.topics,
            self.listener,
            self.metrics,
            host=metrics_host,
            port=metrics_port,
            max_lag_series=s["kcoord.lag.max.series"],
            cluster_status=lambda: None if self.membership is None else self.membership.status(),
            coordinator_moves=self._coordinator_moves if s["kcoord.cluster.enable"] else None,
        )
        self.started = asyncio.Event()

    def _register_apis(self) -> None:
        """Every API kcoord serves, each bound to what it needs; ApiVersions answers with this list."""
        s, topics, node, groups = self.settings, self.topics, self.node, self.groups
        members = MemberWatch(groups, enabled=s["kcoord.fast.failover.enable"])
        specs = [
            api_versions.api(self.registry),
            metadata.api(topics, node, auto_create=s["auto.create.topics.enable"]),
            produce.api(topics, self.producers),
            fetch.api(topics, self.growth_hints),
            list_offsets.api(topics),
            init_producer_id.api(self.producers),
            create_topics.api(topics, s, node.node_id),
            create_partitions.api(topics, node.node_id),
            delete_topics.api(topics, enabled=s["delete.topic.enable"]),
            describe_configs.api(topics, s, node.node_id),
            describe_cluster.api(node),
            find_coordinator.api(node),
            join_group.api(groups, members),
            sync_group.api(groups, members),
            heartbeat.api(groups, members),
            leave_group.api(groups),
            offset_commit.api(groups),
            offset_fetch.api(groups),
            offset_delete.api(groups),
            list_groups.api(groups),
            describe_groups.api(groups),
            delete_groups.api(groups),
        ]
        for spec in specs:
            self.registry.add(spec)

    async def start(self) -> tuple[str, int]:
        """Start everything; returns the Kafka address actually bound.

        A start that fails after the log store opened (a port in use, say) closes what it opened,
        so the data directory is left marked clean, as it was found, for the next start.
        """
        await self.store.open()
        try:
            return await self._start_after_store()
        except BaseException:
            with contextlib.suppress(Exception):
                await self.stop()
            raise

    async def _start_after_store(self) -> tuple[str, int]:
        await self.topics.load()
        await self.producer_snapshots.restore()
        self.producer_snapshots.start()
        await self.coordinator.start()
        self.topics.add_listener(self._on_topic_event)
        bound = await self.listener.start()
        if self.settings["advertised.listeners"] is None:
            self.node.advertised = ("127.0.0.1" if bound[0] in ("0.0.0.0", "::") else bound[0], bound[1])
        if self.settings["kcoord.cluster.enable"]:
            await self._join_cluster()
        advertised = self.node.advertised
        metrics_bound = await self.http.start()
        log.info(
            "kcoord.started",
            listen=f"{bound[0]}:{bound[1]}",
            metrics=f"{metrics_bound[0]}:{metrics_bound[1]}",
            advertised=f"{advertised[0]}:{advertised[1]}",
            node_id=self.node.node_id,
            cluster_id=self.node.cluster_id,
            data_dir=str(self.data_dir),
        )
        self.started.set()
        return bound

    async def _join_cluster(self) -> None:
        """Take the cluster's id, register with a lease, and claim this node's share of the groups."""
        store = self.store
        assert isinstance(store, PostgresLogStore)
        s, ownership = self.settings, Ownership(store.pool)
        self.node.cluster_id = await ownership.cluster_id(self.node.cluster_id)
        coordinator, topics, topic_host = self.coordinator, self.topics, LogOnlyHost()
        self.membership = ClusterMembership(
            ownership,
            store,
            self.node.node_id,
            lambda: self.node.advertised,
            lambda topic: coordinator if topic == OFFSETS_TOPIC else topic_host,
            lambda: [(info.name, p) for info in topics.topics() for p in range(info.partitions)],
            LeaseSettings(lease_ms=s["kcoord.node.lease.ms"], renew_ms=s["kcoord.node.lease.renew.ms"]),
            observer=self.metrics,
        )
        self.membership.on_catalogue = topics.adopt
        self.node.directory = MembershipDirectory(self.membership, coordinator.partition_for)
        await self.membership.start()

    def _coordinator_moves(self, group_id: str) -> list[dict[str, Any]]:
        """Each claim of the group's offsets partition: its history of coordinator moves."""
        if self.membership is None:
            return []
        return self.membership.moves_of(OFFSETS_TOPIC, self.coordinator.partition_for(group_id))

    def _serving(self) -> bool:
        """Whether this node may answer for the groups it holds (alone: always)."""
        return self.membership is None or self.membership.serving()

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
        await self.listener.stop_accepting()
        self.listener.stop_reading()
        if self.membership is not None:
            await self.membership.stop()
        await self.coordinator.stop()
        await self.listener.drain(self.settings["kcoord.shutdown.timeout.ms"] / 1000)
        await self.producer_snapshots.stop()
        await self.store.close()
        await self.http.stop()
        log.info("kcoord.stopped")
