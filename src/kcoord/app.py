"""The composition root: builds kcoord's parts with their dependencies, starts them in order and
stops them in reverse.

Build: identity, log store, topics, producer state, authorizer, group coordinator and its service,
every API (registered here and nowhere else), router, listener, HTTP endpoint.
Start: bind every address (not accepting yet) -> lock the data directory -> log store (which locks
its database) -> (cluster: adopt the security files once) -> topics -> ACLs -> producer state
(rebuilt from the logs) -> credentials, group configs -> group coordinator -> Kafka listener accepts
-> (cluster: poll the shared security state, join) -> HTTP endpoint serves.
Stop (SIGTERM): stop accepting, drain in-flight requests for a bounded time, stop the
coordinator, snapshot producer state, flush and close the logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from kcoord.apis.broker import (
    alter_configs,
    api_versions,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_producers,
    fetch,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    user_scram_credentials,
    write_txn_markers,
)
from kcoord.apis.broker.config_alteration import ConfigTargets
from kcoord.apis.broker.creation_limits import CreationLimits, DescriptorBudget
from kcoord.apis.groups import (
    alter_share_group_offsets,
    consumer_group_describe,
    consumer_group_heartbeat,
    delete_groups,
    delete_share_group_offsets,
    describe_groups,
    describe_share_group_offsets,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    read_share_group_state,
    share_group_describe,
    share_group_heartbeat,
    sync_group,
    txn_offset_commit,
    write_share_group_state,
)
from kcoord.apis.groups.common import MemberWatch
from kcoord.apis.transactions import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    list_transactions,
)
from kcoord.cluster.broker_configs import BrokerConfigs
from kcoord.cluster.catalogue import Catalogue
from kcoord.cluster.file_catalogue import FileCatalogue
from kcoord.cluster.growth_hints import GrowthHints
from kcoord.cluster.identity import Node, read_identity, write_identity
from kcoord.cluster.leader_epochs import RecordedEpochs
from kcoord.cluster.marker_routing import LocalMarkerWriter, RoutingMarkerWriter
from kcoord.cluster.membership import ClusterMembership, MembershipDirectory, PartitionHost
from kcoord.cluster.mode import ClusterMode
from kcoord.cluster.producer_id_allocator import ReadyProducerIds
from kcoord.cluster.producer_keeper import ProducerStateKeeper
from kcoord.cluster.share_state_routing import RoutingShareState
from kcoord.cluster.shared_catalogue import SharedCatalogue
from kcoord.cluster.shared_state import SharedStatePoller, adopt_files
from kcoord.cluster.topic_configs import log_config_for
from kcoord.cluster.topic_manager import TopicChange, TopicEvent, TopicManager
from kcoord.cluster.topic_names import INTERNAL_TOPICS
from kcoord.cluster.transaction_markers import DataMarkerWriter, TransactionVerifier
from kcoord.config import Settings
from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.consumer.config import ConsumerGroupConfig
from kcoord.coordinator.consumer.persistence import TopicIds
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.state_records import SHARE_STATE_TOPIC
from kcoord.coordinator.transactions import TransactionConfig
from kcoord.observability.auth_metrics import AuthMetrics
from kcoord.observability.cache_metrics import watch_storage_cache
from kcoord.observability.endpoint import build_endpoint
from kcoord.observability.group_events import GroupEventObserver
from kcoord.observability.group_views import ShareLookups, share_partition_rows
from kcoord.observability.http_security import http_security
from kcoord.observability.metrics import KcoordMetrics
from kcoord.observability.share_metrics import ShareMetrics
from kcoord.observability.transaction_metrics import TransactionMetrics
from kcoord.protocol.registry import ApiRegistry, ApiSpec
from kcoord.runtime.group_config_store import GroupConfigStore, group_configs_file
from kcoord.runtime.group_coordinator import GroupCoordinator
from kcoord.runtime.group_service import GroupService
from kcoord.runtime.pattern_worker import PatternWorker
from kcoord.runtime.rebalance_journal import JOURNAL_FILE, JournalingObserver, RebalanceJournal
from kcoord.runtime.share_coordinator import ShareCoordinator, ShareStateTopicOf, new_state_shard
from kcoord.runtime.share_partition_leader import ShareDroppingHost, SharePartitionLeader
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.security.acl_store import AclStore, acl_file
from kcoord.security.authorizer import AclAuthorizer, build_authorizer
from kcoord.security.credentials import CredentialStore, credentials_file
from kcoord.security.sasl import SaslSettings
from kcoord.security.scram_decoy import DataDirDecoy, ScramDecoySource, shared_key_loader
from kcoord.server.limits import ConnectionLimits, ServerLimits, parse_overrides
from kcoord.server.listener_set import ListenerSet, advertised_addresses
from kcoord.server.memory_pool import MemoryPool
from kcoord.server.router import Router
from kcoord.storage import open_store
from kcoord.storage.api import PartitionLog
from kcoord.storage.documents import FileDocument, Freshness, StateDocument
from kcoord.storage.holding import DataDirLock
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.broker_configs import SharedBrokerConfigs
from kcoord.storage.postgres.ownership import Ownership
from kcoord.storage.postgres.shared_documents import SCRAM_DECOY_KIND, SHARED_KINDS, SharedDocument
from kcoord.timer.api import Timer
from kcoord.timer.clock import SystemClock

log = structlog.get_logger(__name__)

DEFAULT_ADVERTISED = ("127.0.0.1", 9092)


class App:
    """Every part of one kcoord node, built with its dependencies; :meth:`start` opens and binds them.

    Construction reads the node's identity from the data directory (a new one is written only once
    :meth:`start` holds the directory) and wires the parts; nothing listens, nothing is written and no
    log is opened until :meth:`start`.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        store_url: str | None = None,
        transaction_verifier: TransactionVerifier | None = None,
    ) -> None:
        s = self.settings = settings
        self.clock = SystemClock()
        self.data_dir = Path(s["log.dirs"]).resolve()
        self.data_lock = DataDirLock(self.data_dir)
        identity, self._new_identity = read_identity(self.data_dir, s["node.id"])
        self._identity = identity
        configured = s["advertised.listeners"]
        first = (configured[0].host, configured[0].port) if configured else DEFAULT_ADVERTISED
        self.node = Node(identity.node_id, identity.cluster_id, first)
        self.broker_configs = BrokerConfigs(self.data_dir, s, identity.node_id)
        self.registry = ApiRegistry()
        self.metrics = KcoordMetrics(api_registry=self.registry)
        self.group_events = GroupEventObserver(self.metrics)
        self.auth_metrics = AuthMetrics(self.metrics.registry)
        self.rebalance_journal = RebalanceJournal(self.data_dir / JOURNAL_FILE)
        self._group_observer = JournalingObserver(self.group_events, self.rebalance_journal)
        self.patterns = PatternWorker()
        self.store = open_store(
            store_url or s["kcoord.storage.url"] or f"file://{self.data_dir}",
            log_config_for({}, s),
            clock=self.clock,
            retention_check_interval_ms=s["log.retention.check.interval.ms"],
            log_cleaner_backoff_ms=s["log.cleaner.backoff.ms"],
            postgres_cache_bytes=s["kcoord.storage.postgres.cache.bytes"],
            owned_only=s["kcoord.cluster.enable"],
        )
        self.store.timings = self.metrics
        self.halted = asyncio.Event()
        """Set when this node must stop serving for good: :attr:`halt_reason` says why."""
        self.halt_reason: str | None = None
        if isinstance(self.store, PostgresLogStore):
            watch_storage_cache(self.metrics.registry, self.store.cache)
            self.store.hold.on_lost = self._halt
        self.cluster = ClusterMode.of(s, self.store, identity.node_id)
        """Alone or one of a cluster: handed to every part that serves differently in a cluster."""
        self._security_state()
        self.topics = TopicManager(self.store, s, self._catalogue())
        self.producer_state = ProducerStateKeeper(
            self.data_dir,
            self.store,
            cluster=self.cluster,
            clock=self.clock,
            internal_topics=INTERNAL_TOPICS,
        )
        self.producers = self.producer_state.producers
        self.store.first_unstable = self.producers.first_unstable_offset
        self.data_markers = DataMarkerWriter(self.topics, self.producers, self.clock)
        """Transaction markers to this node's data partitions (issue 17, contract A)."""
        self._given_verifier = transaction_verifier
        self.growth_hints = GrowthHints(self.clock)
        self.authorizer = build_authorizer(s, self.acl_store, self.freshness)
        self.share_config = share_group_config(s)
        self._share_state()
        self.coordinator = GroupCoordinator(
            self.topics,
            self.clock,
            self._new_shard,
            num_partitions=s["offsets.topic.num.partitions"],
            expiry_interval_ms=s["offsets.retention.check.interval.ms"],
            append_timeout_ms=s["offsets.commit.timeout.ms"],
            observer=self.metrics,
            owned_only=self.cluster.enabled,
            serving=self._serving,
        )
        self._transaction_coordinator()
        self.membership: ClusterMembership | None = None
        self.leader_epochs = RecordedEpochs()
        """Set at start when ``kcoord.cluster.enable``: this node's lease and owned partitions."""
        self.groups = GroupService(
            self.coordinator,
            groups_deleted=None if self.cluster.enabled else self.share_leader.delete_groups,
            patterns=self.patterns,
        )
        self.creation_limits = CreationLimits(
            rate=s["controller.mutation.rate"],
            auto_create_rate=s["kcoord.auto.create.rate"],
            max_partitions_per_request=s["kcoord.max.partitions.per.request"],
            observe=self.metrics.limit_hit,
            descriptors=DescriptorBudget(s["kcoord.descriptors.reserved"]),
        )
        self._register_apis()
        self.router = Router(self.registry)
        self.router.observers.append(self.metrics.observe_request)  # the stats' own method
        self.router.exchange_observers.append(self.metrics.observe_exchange)
        self.listener = ListenerSet.build(s, self.router, self._sasl_settings, self._server_limits())
        self.broker_configs.appliers += [
            self._apply_connection_limits,
            lambda _: self.topics.reapply_log_configs(),
        ]
        metrics_host, metrics_port = s["kcoord.metrics.listen"]
        self.http = build_endpoint(
            self.coordinator,
            self.topics,
            self.listener,
            self.metrics,
            host=metrics_host,
            port=metrics_port,
            max_lag_series=s["kcoord.lag.max.series"],
            **http_security(s, self.credentials, self.auth_metrics),
            cluster_status=lambda: None if self.membership is None else self.membership.status(),
            coordinator_moves=self._coordinator_moves if self.cluster.enabled else None,
            share=ShareLookups(
                lambda group_id: share_partition_rows(
                    self.share_leader.partition_views(group_id), self._topic_name
                ),
                self._topic_name,
            ),
        )
        self.started = asyncio.Event()

    def _share_state(self) -> None:
        """The share coordinator over ``__share_group_state`` and the share partitions this node leads.
        In a cluster the state partitions are owned and fenced by the membership, as
        ``__consumer_offsets``'s are; a share partition lives with its topic partition (loaded under
        its leader epoch, dropped on release) and reaches a state partition another node owns by
        Read/WriteShareGroupState (:mod:`kcoord.cluster.share_state_routing`)."""
        s, topics = self.settings, self.topics
        share_metrics = ShareMetrics(self.metrics.registry)

        def state_partitions() -> int | None:
            info = topics.get(SHARE_STATE_TOPIC)
            return None if info is None else info.partitions

        async def create_state_topic(partitions: int, configs: Mapping[str, str]) -> None:
            await topics.create(SHARE_STATE_TOPIC, partitions, -1, configs, internal=True)

        self.share_state = ShareCoordinator(
            ShareStateTopicOf(topics, state_partitions, create_state_topic),
            self.clock,
            new_state_shard(self.share_config),
            num_partitions=s["share.coordinator.state.topic.num.partitions"],
            prune_interval_ms=s["share.coordinator.state.topic.prune.interval.ms"],
            cold_snapshot_interval_ms=s["share.coordinator.cold.partition.snapshot.interval.ms"],
            on_pruned=share_metrics.state_pruned,
            append_timeout_ms=s["offsets.commit.timeout.ms"],
            owned_only=self.cluster.enabled,
            serving=self._serving,
        )
        self.share_routing = RoutingShareState(self.share_state, self._owner_elsewhere)
        self.share_leader = SharePartitionLeader(
            self.share_config,
            self.share_routing if self.cluster.enabled else self.share_state,
            self._log_by_topic_id,
            self.clock,
            max_sessions=s["group.share.max.share.sessions"],
            auto_offset_reset=self.group_configs.overrides.share_auto_offset_reset,
            on_loaded=lambda group_id, topic_id, partition: self.groups.share_partition_initialized(
                group_id, topic_id, partition
            ),
            observer=share_metrics,
            leader_epoch=self._share_leader_epoch,
            missing_log_error=lambda topic_id, partition: topics.missing_log_error(
                self._topic_name(topic_id) or "", partition
            ),
        )
        share_metrics.watch(lambda: len(self.share_leader.sessions), self.share_leader.partition_count)

    def _share_leader_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch this node leads the topic partition under (-1 alone, None while it does not)."""
        if not self.cluster.enabled:
            return -1
        name = self._topic_name(topic_id)
        if self.membership is None or name is None:
            return None
        return self.membership.owned().get((name, partition))

    def _log_by_topic_id(self, topic_id: uuid.UUID, partition: int) -> PartitionLog | None:
        info = self.topics.get_by_id(topic_id)
        return None if info is None else self.topics.partition_log(info.name, partition)

    def _transaction_coordinator(self) -> None:
        """The transaction coordinator over ``__transaction_state``, its producer ids and its metrics."""
        s = self.settings
        self.transaction_ids = ReadyProducerIds(self.producers.new_producer_id)
        group_log = self.coordinator
        self.local_markers = LocalMarkerWriter(self.data_markers, group_log, group_log.kind.topic)
        """This node's partitions' markers, data and offsets (the coordinator's and WriteTxnMarkers')."""
        self.routed_markers = RoutingMarkerWriter(self.local_markers, self._owner_elsewhere)
        self.transaction_metrics = TransactionMetrics(self.metrics.registry)
        self.transactions = TransactionCoordinator(
            self.topics,
            self.clock,
            self.transaction_ids,
            TransactionConfig(
                max_timeout_ms=s["transaction.max.timeout.ms"],
                id_expiration_ms=s["transactional.id.expiration.ms"],
                abort_timed_out_interval_ms=s["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                remove_expired_interval_ms=s["transaction.remove.expired.transaction.cleanup.interval.ms"],
                offsets_topic_partitions=s["offsets.topic.num.partitions"],
            ),
            marker_writer=self.routed_markers,
            transaction_observer=self.transaction_metrics,
            coordinator_epoch=self._coordinator_epoch,
            num_partitions=s["transaction.state.log.num.partitions"],
            append_timeout_ms=s["offsets.commit.timeout.ms"],
            owned_only=self.cluster.enabled,
            serving=self._serving,
        )
        self.transaction_metrics.watch(self.transactions.stats)
        self.transaction_verifier: TransactionVerifier = self._given_verifier or self.transactions
        """What lets a transactional Produce in (contract C): the transaction coordinator, unless a test
        hands in its own."""

    def _coordinator_epoch(self, topic: str, partition: int) -> int:
        """The epoch this node coordinates ``topic``-``partition`` under: the leader epoch it holds the
        partition with (0 alone, or when it no longer holds it: its markers stop anyway)."""
        return 0 if self.membership is None else self.membership.owned().get((topic, partition), 0)

    def _owner_elsewhere(self, topic: str, partition: int) -> tuple[str, int] | None:
        """Where a call for ``topic``-``partition`` goes (a transaction marker, a share partition's
        state): None for this node."""
        owner = None if self.membership is None else self.membership.owner_of(topic, partition)
        if owner is None or owner.node_id == self.node.node_id:
            return None
        return owner.host, owner.port

    def _catalogue(self) -> Catalogue:
        """The topic catalogue: ``topics.json`` alone, the shared table in a cluster."""
        if self.cluster.store is None:
            return FileCatalogue(self.store, self.settings, self.data_dir)
        return SharedCatalogue(self.cluster.store, self.metrics)

    def _security_state(self) -> None:
        """Where the ACLs, SCRAM credentials, group configs and the SCRAM decoy key live: the data
        directory's files on a single node; in a cluster, documents every node shares in PostgreSQL,
        adopted from those files once, then polled (:mod:`kcoord.cluster.shared_state`; the decoy
        key is read once, :mod:`kcoord.security.scram_decoy`)."""
        files = acl_file(self.data_dir), credentials_file(self.data_dir), group_configs_file(self.data_dir)
        self.freshness = Freshness.always()
        self.shared_state: SharedStatePoller | None = None
        self._adoptions: list[tuple[FileDocument, SharedDocument]] = []
        shared = self.cluster.store
        self.scram_decoy: ScramDecoySource = DataDirDecoy(self.data_dir)
        if shared is None:
            acls: StateDocument = files[0]
            credentials: StateDocument = files[1]
            group_configs: StateDocument = files[2]
        else:
            store = shared
            documents = [SharedDocument(lambda: store.pool, kind) for kind in SHARED_KINDS]
            acls, credentials, group_configs = documents
            decoy_key = SharedDocument(lambda: store.pool, SCRAM_DECOY_KIND)
            self.scram_decoy = ScramDecoySource(shared_key_loader(decoy_key, self.data_dir))
            self._adoptions = list(zip(files, documents, strict=True))
            self.freshness = Freshness(self.cluster.max_staleness_ms / 1000)
            self.metrics.watch_shared_state(self.freshness.age_s)
        self.acl_store = AclStore(acls)
        self.credentials = CredentialStore(
            credentials, reread_on_login=shared is None, freshness=self.freshness
        )
        self.group_configs = GroupConfigStore(group_configs)

    def _server_limits(self) -> ServerLimits:
        s = self.settings
        connections = self.connection_limits = ConnectionLimits(
            max_connections=s["max.connections"],
            max_per_ip=s["max.connections.per.ip"],
            per_ip_overrides=parse_overrides(s["max.connections.per.ip.overrides"]),
            observe=self.metrics.limit_hit,
        )
        pool = MemoryPool(s["queued.max.request.bytes"])
        self.metrics.watch_request_memory(lambda: pool.used, lambda: pool.waiting)
        read_timeout_s = s["kcoord.request.read.timeout.ms"] / 1000
        return ServerLimits(
            connections,
            pool,
            read_timeout_s=read_timeout_s,
            observe=self.metrics.limit_hit,
            send_buffer_bytes=s["socket.send.buffer.bytes"],
            receive_buffer_bytes=s["socket.receive.buffer.bytes"],
        )

    def _apply_connection_limits(self, changed: list[str]) -> None:
        if any(name.startswith("max.connections") for name in changed):
            s = self.settings
            self.connection_limits.reconfigure(
                max_connections=s["max.connections"],
                max_per_ip=s["max.connections.per.ip"],
                per_ip_overrides=parse_overrides(s["max.connections.per.ip.overrides"]),
            )

    def _register_apis(self) -> None:
        """Every API kcoord serves, each bound to what it needs; ApiVersions answers with this list."""
        s, topics, node, groups, auth = self.settings, self.topics, self.node, self.groups, self.authorizer
        members = MemberWatch(groups, enabled=s["kcoord.fast.failover.enable"])
        specs = [
            api_versions.api(self.registry),
            metadata.api(
                topics,
                node,
                auto_create=s["auto.create.topics.enable"],
                creation=self.creation_limits,
                authorizer=auth,
            ),
            produce.api(
                topics=topics, producers=self.producers, authorizer=auth, verifier=self.transaction_verifier
            ),
            fetch.api(topics=topics, hints=self.growth_hints, authorizer=auth, producers=self.producers),
            list_offsets.api(topics=topics, authorizer=auth, producers=self.producers),
            write_txn_markers.api(writer=self.local_markers, authorizer=auth),
            describe_producers.api(topics=topics, producers=self.producers, authorizer=auth),
            offset_for_leader_epoch.api(topics=topics, history=self.leader_epochs, authorizer=auth),
            init_producer_id.api(producers=self.producers, authorizer=auth, transactions=self.transactions),
            create_topics.api(
                topics=topics,
                settings=s,
                node_id=node.node_id,
                creation=self.creation_limits,
                authorizer=auth,
            ),
            create_partitions.api(
                topics=topics, node_id=node.node_id, creation=self.creation_limits, authorizer=auth
            ),
            delete_topics.api(topics=topics, enabled=s["delete.topic.enable"], authorizer=auth),
            delete_records.api(topics=topics, authorizer=auth),
            describe_configs.api(
                topics=topics,
                settings=s,
                node_id=node.node_id,
                authorizer=auth,
                group_configs=self.group_configs.overrides,
                cluster_defaults=lambda: self.broker_configs.of(""),
            ),
            *self._config_alteration_apis(),
            describe_cluster.api(node, authorizer=auth),
            describe_acls.api(auth),
            create_acls.api(auth),
            delete_acls.api(auth),
            sasl_handshake.api(),
            sasl_authenticate.api(),
            user_scram_credentials.describe_api(self.credentials, authorizer=auth),
            user_scram_credentials.alter_api(self.credentials, authorizer=auth),
            find_coordinator.api(node, authorizer=auth),
            join_group.api(groups=groups, members=members, authorizer=auth),
            sync_group.api(groups=groups, members=members, authorizer=auth),
            heartbeat.api(groups, members, authorizer=auth),
            leave_group.api(groups, authorizer=auth),
            offset_commit.api(groups, authorizer=auth),
            offset_fetch.api(groups, authorizer=auth),
            txn_offset_commit.api(groups, authorizer=auth),
            offset_delete.api(groups, authorizer=auth),
            list_groups.api(groups, authorizer=auth),
            describe_groups.api(groups, authorizer=auth),
            delete_groups.api(groups, authorizer=auth),
            add_partitions_to_txn.api(self.transactions, topics.get, authorizer=auth),
            add_offsets_to_txn.api(self.transactions, authorizer=auth),
            end_txn.api(self.transactions, authorizer=auth),
            describe_transactions.api(self.transactions, authorizer=auth),
            list_transactions.api(transactions=self.transactions, patterns=self.patterns, authorizer=auth),
        ]
        if "consumer" in s["group.coordinator.rebalance.protocols"]:
            specs += [
                consumer_group_heartbeat.api(groups=groups, topics=topics, members=members, authorizer=auth),
                consumer_group_describe.api(groups, topics, authorizer=auth),
            ]
        specs += [
            share_group_heartbeat.api(groups, authorizer=auth),
            share_group_describe.api(groups, topics, authorizer=auth),
            share_fetch.api(self.share_leader, self._topic_name, node.node_id, authorizer=auth),
            share_acknowledge.api(self.share_leader, self._topic_name, node.node_id, authorizer=auth),
        ]
        if self.cluster.enabled:  # the share coordinator's state RPCs, between nodes
            specs += [
                read_share_group_state.api(self.share_state, authorizer=auth),
                write_share_group_state.api(self.share_state, authorizer=auth),
            ]
        else:  # the offsets APIs of share groups reach only this node's share state
            specs += [
                describe_share_group_offsets.api(groups, self.share_leader, topics, authorizer=auth),
                alter_share_group_offsets.api(groups, self.share_leader, topics, authorizer=auth),
                delete_share_group_offsets.api(groups, self.share_leader, topics, authorizer=auth),
            ]
        for spec in specs:
            self.registry.add(spec)

    def _config_alteration_apis(self) -> list[ApiSpec]:
        targets = ConfigTargets(
            self.settings, self.authorizer, self.topics, self.group_configs, self.broker_configs
        )
        return [alter_configs.api(targets), incremental_alter_configs.api(targets)]

    def _sasl_settings(self, listener_name: str) -> SaslSettings:
        s = self.settings
        return SaslSettings(
            mechanisms=s["sasl.enabled.mechanisms"],
            failure_delay_s=s["connection.failed.authentication.delay.ms"] / 1000,
            store=self.credentials,
            on_failure=lambda mechanism: self.auth_metrics.failure(listener_name, mechanism),
            max_receive_bytes=s["sasl.server.max.receive.size"],
            decoy=self.scram_decoy,
        )

    async def start(self) -> tuple[str, int]:
        """Start everything; returns the address the first Kafka listener actually bound.

        What can refuse a start comes first and touches nothing: every address is bound (not yet
        accepting), then the data directory's lock is taken, and only then is anything in it read
        for writing or written (the identity, the log store, which takes its database's lock before
        it writes). A start refused there leaves the directory as it found it, byte for byte. A
        start that fails after the log store opened closes what it opened, so the directory is left
        marked clean for the next start.
        """
        try:
            await self._bind()
            await asyncio.to_thread(self.data_lock.acquire)
            if self._new_identity:
                await asyncio.to_thread(write_identity, self.data_dir, self._identity)
                self._new_identity = False
            await self.store.open()
        except BaseException:
            await self.listener.stop_accepting()
            await self.http.stop()
            self.data_lock.release()
            raise
        try:
            return await self._start_after_store()
        except BaseException:
            with contextlib.suppress(Exception):
                await self.stop()
            raise

    async def _bind(self) -> None:
        """Bind every Kafka listener and the HTTP endpoint, and settle the advertised addresses."""
        all_bound = await self.listener.bind()
        self.node.bound(advertised_addresses(self.settings, all_bound))
        await self.http.bind()

    async def _start_after_store(self) -> tuple[str, int]:
        await adopt_files(self._adoptions)
        await self.topics.load()
        shared = self.cluster.store
        await self.broker_configs.load(None if shared is None else SharedBrokerConfigs(shared.pool))
        if isinstance(self.authorizer, AclAuthorizer):
            await self.authorizer.load()
        await self.producer_state.start()
        await self.credentials.load()
        await self.group_configs.load()
        self.freshness.succeeded()
        await self.rebalance_journal.load()
        await self.coordinator.start()
        await self._start_transactions()
        self.share_leader.start()
        self.topics.add_listener(self._on_topic_event)
        all_bound = await self.listener.start()
        bound = next(iter(all_bound.values()))
        if self.cluster.enabled:
            self._poll_shared_state()
            await self._join_cluster()
        advertised = self.node.advertised
        metrics_bound = await self.http.start()
        self.metrics.loop_lag.start()
        self.metrics.gc_pauses.start()
        log.info(
            "kcoord.started",
            listen=f"{bound[0]}:{bound[1]}",
            listeners={name: f"{host}:{port}" for name, (host, port) in all_bound.items()},
            metrics=f"{metrics_bound[0]}:{metrics_bound[1]}",
            advertised=f"{advertised[0]}:{advertised[1]}",
            node_id=self.node.node_id,
            cluster_id=self.node.cluster_id,
            data_dir=str(self.data_dir),
        )
        self.started.set()
        return bound

    async def _start_transactions(self) -> None:
        """Transactions place a group's offsets by the offsets topic's real partition count."""
        config = self.transactions.config
        self.transactions.config = dataclasses.replace(
            config, offsets_topic_partitions=self.coordinator.num_partitions
        )
        self.transaction_ids.start()
        await self.transactions.start()

    async def _join_cluster(self) -> None:
        """Take the cluster's id, register with a lease, and claim this node's share of the groups."""
        store = self.cluster.shared_store
        ownership = Ownership(store.pool)
        cluster_id = await ownership.cluster_id(self.node.cluster_id)
        coordinator, topics = self.coordinator, self.topics
        transactions = self.transactions
        hosted_by: dict[str, PartitionHost] = {
            coordinator.kind.topic: coordinator,
            transactions.kind.topic: transactions,
            SHARE_STATE_TOPIC: self.share_state,
        }
        self.membership = ClusterMembership(
            ownership,
            store,
            self.cluster.node_id,
            lambda: self.node.advertised,
            lambda topic: hosted_by.get(topic) or self._data_host(topic),
            lambda: [(info.name, p) for info in topics.topics() for p in range(info.partitions)],
            self.cluster.lease,
            observer=self.metrics,
            on_catalogue=self._refresh_shared_state,
            on_displaced=self._halt,
        )
        self.leader_epochs.ownership = ownership
        self.node.joined(
            cluster_id,
            MembershipDirectory(
                self.membership,
                {coordinator.kind.key_type: coordinator, transactions.kind.key_type: transactions},
            ),
        )
        await self.membership.start()

    def _data_host(self, topic: str) -> ShareDroppingHost:
        """A data topic's partitions move with their producer state and their share partitions."""
        return ShareDroppingHost(
            self.producer_state.host_for(topic),
            lambda: None if (info := self.topics.get(topic)) is None else info.topic_id,
            self.share_leader,
        )

    async def _refresh_shared_state(self) -> None:
        """On every renewal: other nodes' topic catalogue changes and dynamic broker configs."""
        await self.topics.refresh()
        await self.broker_configs.refresh()

    def _poll_shared_state(self) -> None:
        """Apply other nodes' changes of the shared ACLs, credentials and group configs."""
        refreshes = [self.credentials.refresh, self.group_configs.refresh]
        if isinstance(self.authorizer, AclAuthorizer):
            refreshes.insert(0, self.authorizer.refresh)
        interval_s = self.settings["kcoord.node.lease.renew.ms"] / 1000
        self.shared_state = SharedStatePoller(refreshes, self.freshness, interval_s)
        self.shared_state.start()

    def _halt(self, reason: str) -> None:
        """This node lost what it needs to serve (its database's lock, its node id): stop it."""
        if self.halt_reason is None:
            self.halt_reason = reason
            self.halted.set()

    def _coordinator_moves(self, group_id: str) -> list[dict[str, Any]]:
        """Each claim of the group's offsets partition: its history of coordinator moves."""
        if self.membership is None:
            return []
        return self.membership.moves_of(self.coordinator.kind.topic, self.coordinator.partition_for(group_id))

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
            observer=self._group_observer,
            past_rebalances=self.rebalance_journal.history,
            consumer_config=ConsumerGroupConfig(
                session_timeout_ms=s["group.consumer.session.timeout.ms"],
                heartbeat_interval_ms=s["group.consumer.heartbeat.interval.ms"],
                assignors=s["group.consumer.assignors"],
                max_size=s["group.max.size"],
                migration_policy=s["group.consumer.migration.policy"],
            ),
            partition_count=self._partition_count,
            topic_ids=TopicIds(self._topic_id, self._topic_name),
            topic_names=self._subscribable_topics,
            group_overrides=self.group_configs.overrides,
            share_config=self.share_config,
        )

    def _on_topic_event(self, event: TopicEvent) -> None:
        if event.change is TopicChange.PARTITIONS_ADDED:
            self.growth_hints.topic_grew(event.topic.name)
            self.coordinator.partitions_added(event.topic.name)
        else:
            if event.change is TopicChange.DELETED:
                # Its producers' state and open transactions go with its logs (a topic created
                # again under the name starts with none, its LSO not held by the old ones).
                for partition in range(event.topic.partitions):
                    self.producers.drop_partition(event.topic.name, partition)
            self.coordinator.topic_changed(event.topic.name)

    def _partition_count(self, topic: str) -> int | None:
        info = self.topics.get(topic)
        return None if info is None else info.partitions

    def _subscribable_topics(self) -> list[str]:
        """What a regex subscription may match: internal topics are left out."""
        return [name for name in self.topics.names() if name not in INTERNAL_TOPICS]

    def _topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.topics.get(topic)
        return None if info is None else info.topic_id

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self.topics.get_by_id(topic_id)
        return None if info is None else info.name

    def _topic_partition_exists(self, topic: str, partition: int) -> bool:
        info = self.topics.get(topic)
        return info is not None and 0 <= partition < info.partitions

    async def stop(self) -> None:
        """Stop accepting, drain in-flight requests (bounded), then flush and close the logs."""
        await self.listener.stop_accepting()
        self.listener.stop_reading()
        if self.shared_state is not None:
            await self.shared_state.stop()
        if self.membership is not None:
            await self.membership.stop()
        await self.transactions.stop()
        await self.transaction_ids.stop()
        self.routed_markers.close()
        await self.coordinator.stop()
        await self.share_leader.stop()
        self.share_routing.close()
        await self.share_state.stop()
        await self.listener.drain(self.settings["kcoord.shutdown.timeout.ms"] / 1000)
        await self.groups.stop()
        await self.patterns.close()
        await self.rebalance_journal.close()
        await self.producer_state.stop()
        await self.store.close()
        await self.http.stop()
        self.metrics.loop_lag.stop()
        self.metrics.gc_pauses.stop()
        self.credentials.close()
        self.data_lock.release()
        log.info("kcoord.stopped")


def share_group_config(s: Settings) -> ShareGroupConfig:
    """The share groups' settings (``group.share.*``, ``share.coordinator.*``)."""
    return ShareGroupConfig(
        session_timeout_ms=s["group.share.session.timeout.ms"],
        heartbeat_interval_ms=s["group.share.heartbeat.interval.ms"],
        max_size=s["group.share.max.size"],
        record_lock_duration_ms=s["group.share.record.lock.duration.ms"],
        delivery_count_limit=s["group.share.delivery.count.limit"],
        partition_max_record_locks=s["group.share.partition.max.record.locks"],
        snapshot_update_records_per_snapshot=s["share.coordinator.snapshot.update.records.per.snapshot"],
        state_topic_num_partitions=s["share.coordinator.state.topic.num.partitions"],
    )
