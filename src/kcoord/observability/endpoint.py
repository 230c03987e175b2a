"""Assembles the observability HTTP endpoint of one node: the scrape-time collector and the routes.

- ``/metrics``: the Prometheus exposition of the node's own registry;
- ``/v1/groups``: every group (state, protocol type, members, generation, rebalances);
- ``/v1/groups/{group}``: members, assignments, offsets and lag, the last rebalances (in a cluster
  also ``coordinator_moves``: each claim of the group's offsets partition); for a share group its
  share partitions (start offset, in-flight and archived counts, lag); 404 if unknown;
- ``/v1/cluster``: in a cluster, the live nodes and which node owns each partition (with its epoch);
  a single node says ``{"cluster": false}``.
- ``/ui``: the web console over the group views (:mod:`kcoord.observability.console_route`).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable
from typing import Any

from kcoord.cluster.topic_manager import TopicManager
from kcoord.observability.collector import GroupCollector
from kcoord.observability.console_route import console_route
from kcoord.observability.group_views import (
    NO_SHARE_LOOKUPS,
    ShardView,
    ShareLookups,
    describe_group,
    list_groups,
)
from kcoord.observability.http import Authorize, HttpEndpoint, HttpResponse, Route
from kcoord.observability.metrics import CONTENT_TYPE_LATEST, KcoordMetrics
from kcoord.runtime.group_coordinator import GroupCoordinator
from kcoord.runtime.runner import PartitionState
from kcoord.server.listener_set import ListenerSet

GROUPS_PATH = "/v1/groups"
CLUSTER_PATH = "/v1/cluster"


def build_endpoint(
    coordinator: GroupCoordinator,
    topics: TopicManager,
    listener: ListenerSet,
    metrics: KcoordMetrics,
    *,
    host: str,
    port: int,
    max_lag_series: int,
    ssl_context: ssl.SSLContext | None = None,
    authorize: Authorize | None = None,
    cluster_status: Callable[[], dict[str, Any] | None] = lambda: None,
    coordinator_moves: Callable[[str], list[dict[str, Any]]] | None = None,
    share: ShareLookups = NO_SHARE_LOOKUPS,
) -> HttpEndpoint:
    """The endpoint over these parts; registers the scrape-time collector in ``metrics``' registry."""

    def shards() -> Iterable[ShardView]:
        return list(coordinator.active_shards())

    def log_end_offset(topic: str, partition: int) -> int | None:
        partition_log = topics.partition_log(topic, partition)
        return None if partition_log is None else partition_log.log_end_offset

    def load_seconds() -> list[tuple[int, float]]:
        return [
            (runner.partition, runner.load_stats.seconds)
            for runner in coordinator.all_runners()
            if runner.state is not PartitionState.LOADING
        ]

    def open_connections() -> int:
        return listener.open_connections

    metrics.registry.register(
        GroupCollector(
            shards,
            log_end_offset,
            max_lag_series=max_lag_series,
            load_seconds=load_seconds,
            open_connections=open_connections,
        )
    )

    def metrics_route(path: str) -> HttpResponse | None:
        if path != "/metrics":
            return None
        return HttpResponse(200, metrics.exposition(), CONTENT_TYPE_LATEST)

    def groups_route(path: str) -> HttpResponse | None:
        if path.rstrip("/") == GROUPS_PATH:
            return HttpResponse.json(list_groups(shards()))
        if not path.startswith(GROUPS_PATH + "/"):
            return None
        group_id = path[len(GROUPS_PATH) + 1 :]
        view: dict[str, Any] | None = describe_group(shards(), group_id, log_end_offset, share)
        if view is None:
            return HttpResponse.json({"error": f"unknown group {group_id!r}"}, 404)
        if coordinator_moves is not None:
            view["coordinator_moves"] = coordinator_moves(group_id)
        return HttpResponse.json(view)

    def cluster_route(path: str) -> HttpResponse | None:
        if path.rstrip("/") != CLUSTER_PATH:
            return None
        status = cluster_status()
        return HttpResponse.json({"cluster": False} if status is None else {"cluster": True, **status})

    routes: list[Route] = [metrics_route, groups_route, cluster_route, console_route()]
    return HttpEndpoint(host, port, routes, ssl_context=ssl_context, authorize=authorize)
