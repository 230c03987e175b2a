"""Gauges computed at scrape time from the live state: groups, members, lag, loads, connections.

Nothing is kept between scrapes, so a deleted group or an unloaded partition simply stops being
reported. Consumer lag is ``log end offset - committed offset`` for every committed partition of
every group, in (group, topic, partition) order, at most ``max_lag_series`` series; how many were
left out by that cap is itself a gauge, so a dashboard can tell a short list from a cut one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import KW_ONLY, dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kcoord.observability.group_views import DESCRIBE_VERSION, LogEndOffset, ShardView

GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
CONSUMER_GROUP_STATES = ("Empty", "Assigning", "Reconciling", "Stable")


@dataclass(eq=False)
class GroupCollector(Collector):
    """Where each scrape reads the live state from, and how many lag series it reports at most."""

    shards: Callable[[], Iterable[ShardView]]
    log_end_offset: LogEndOffset
    _: KW_ONLY
    max_lag_series: int
    load_seconds: Callable[[], Iterable[tuple[int, float]]] = tuple
    open_connections: Callable[[], int] = lambda: 0

    def describe(self) -> list[GaugeMetricFamily]:
        """Nothing at registration: the families are only built when scraped."""
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        shards = list(self.shards())
        yield from self._groups(shards)
        yield from self._lag(shards)
        loads = GaugeMetricFamily(
            "kcoord_offsets_partition_load_seconds",
            "Time the last load of that __consumer_offsets partition took.",
            labels=["partition"],
        )
        for partition, seconds in self.load_seconds():
            loads.add_metric([str(partition)], seconds)
        yield loads
        yield GaugeMetricFamily(
            "kcoord_connections_open", "Open client connections.", value=self.open_connections()
        )

    def _groups(self, shards: list[ShardView]) -> Iterator[GaugeMetricFamily]:
        by_state: Counter[tuple[str, str]] = Counter()
        members: Counter[str] = Counter()
        for shard in shards:
            listed = shard.classic.list_groups()
            described = shard.classic.describe_groups([g.group_id for g in listed], DESCRIBE_VERSION)
            for group, description in zip(listed, described, strict=True):
                by_state[(group.state, group.protocol_type)] += 1
                members[group.protocol_type] += len(description.members)
        protocol_types = {"consumer"} | {protocol for _, protocol in by_state}
        groups = GaugeMetricFamily(
            "kcoord_groups", "Groups by state and protocol type.", labels=["state", "protocol_type"]
        )
        for protocol in sorted(protocol_types):
            for state in GROUP_STATES:
                groups.add_metric([state, protocol], by_state.get((state, protocol), 0))
        yield groups
        member_family = GaugeMetricFamily(
            "kcoord_group_members", "Members over all groups.", labels=["protocol_type"]
        )
        for protocol in sorted(protocol_types):
            member_family.add_metric([protocol], members.get(protocol, 0))
        yield member_family
        yield from self._consumer_groups(shards)

    def _consumer_groups(self, shards: list[ShardView]) -> Iterator[GaugeMetricFamily]:
        """KIP-848 groups apart: their states are not the classic ones."""
        by_state: Counter[str] = Counter()
        members = 0
        for shard in shards:
            for group_id, state in shard.consumer.listed(None):
                by_state[state] += 1
                described = shard.consumer.describe(group_id)
                members += 0 if described is None else len(described.members)
        groups = GaugeMetricFamily(
            "kcoord_consumer_protocol_groups", "KIP-848 consumer groups by state.", labels=["state"]
        )
        for state in CONSUMER_GROUP_STATES:
            groups.add_metric([state], by_state.get(state, 0))
        yield groups
        yield GaugeMetricFamily(
            "kcoord_consumer_protocol_group_members",
            "Members over all KIP-848 consumer groups.",
            value=members,
        )

    def _lag(self, shards: list[ShardView]) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "kcoord_consumer_lag",
            "Log end offset minus committed offset.",
            labels=["group", "topic", "partition"],
        )
        series = 0
        dropped = 0
        groups = sorted(
            ((group_id, shard) for shard in shards for group_id in shard.offsets.all_groups_with_offsets()),
            key=lambda item: item[0],
        )
        for group_id, shard in groups:
            for (topic, partition), committed in sorted(shard.offsets.group_offsets(group_id).items()):
                end = self.log_end_offset(topic, partition)
                if end is None:
                    continue
                if series >= self.max_lag_series:
                    dropped += 1
                    continue
                series += 1
                lag.add_metric([group_id, topic, str(partition)], max(end - committed, 0))
        yield lag
        yield GaugeMetricFamily(
            "kcoord_consumer_lag_series_dropped",
            "Lag series left out by kcoord.lag.max.series at the last scrape.",
            value=dropped,
        )
