"""The scrape-time collector and the JSON group views, over a real classic manager and fake offsets."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from kcoord.coordinator.classic.manager import ClassicGroupManager
from kcoord.coordinator.consumer.config import ConsumerGroupConfig
from kcoord.coordinator.consumer.manager import ConsumerGroupManager
from kcoord.coordinator.pending_offsets import OpenTransaction, SettledTransaction
from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.manager import ShareGroupManager
from kcoord.observability.collector import GroupCollector
from kcoord.observability.group_views import describe_group, list_groups
from kcoord.observability.metrics import KcoordMetrics
from tests.coordinator.classic.classic_harness import FakeTimer, Harness, form_group


@dataclass
class FakeOffsets:
    """Committed offsets by group, as the offsets manager reports them."""

    committed: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)

    def group_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        return dict(self.committed.get(group_id, {}))

    def all_groups_with_offsets(self) -> list[str]:
        return sorted(self.committed)

    def open_transactions(self, group_id: str) -> list[OpenTransaction]:
        return []

    def settled_transactions(self, group_id: str) -> list[SettledTransaction]:
        return []


def _no_consumer_groups() -> ConsumerGroupManager:
    return ConsumerGroupManager(FakeTimer(), ConsumerGroupConfig(), lambda topic: None)


def _no_share_groups() -> ShareGroupManager:
    return ShareGroupManager(ShareGroupConfig(), FakeTimer(), lambda topic: None)


@dataclass
class FakeShard:
    classic: ClassicGroupManager
    offsets: FakeOffsets
    consumer: ConsumerGroupManager = field(default_factory=_no_consumer_groups)
    share: ShareGroupManager = field(default_factory=_no_share_groups)


LOG_END = {("orders", 0): 10, ("orders", 1): 7, ("orders", 2): 3}


def shard_with_group() -> FakeShard:
    h = Harness()
    form_group(h, 2)
    offsets = FakeOffsets({"g": {("orders", 0): 4, ("orders", 1): 7, ("orders", 2): 5}, "other": {}})
    offsets.committed["simple"] = {("gone", 0): 1}
    return FakeShard(h.manager, offsets)


def registry_for(shards: list[FakeShard], max_lag_series: int = 100) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(
        GroupCollector(
            lambda: shards,
            lambda topic, partition: LOG_END.get((topic, partition)),
            max_lag_series=max_lag_series,
            load_seconds=lambda: [(0, 0.25)],
            open_connections=lambda: 3,
        )
    )
    return registry


def test_groups_members_and_lag_are_computed_at_scrape() -> None:
    """Group counts by state, member counts and lag per committed partition come from the live state."""
    registry = registry_for([shard_with_group()])
    value = registry.get_sample_value
    assert value("kcoord_groups", {"state": "Stable", "protocol_type": "consumer"}) == 1
    assert value("kcoord_groups", {"state": "Empty", "protocol_type": "consumer"}) == 0
    assert value("kcoord_group_members", {"protocol_type": "consumer"}) == 2
    lag = {
        p: value("kcoord_consumer_lag", {"group": "g", "topic": "orders", "partition": str(p)})
        for p in range(3)
    }
    assert lag == {0: 6, 1: 0, 2: 0}
    assert value("kcoord_consumer_lag", {"group": "simple", "topic": "gone", "partition": "0"}) is None
    assert value("kcoord_consumer_lag_series_dropped") == 0
    assert value("kcoord_offsets_partition_load_seconds", {"partition": "0"}) == 0.25
    assert value("kcoord_connections_open") == 3


def test_lag_series_are_capped_and_the_rest_counted() -> None:
    """Past kcoord.lag.max.series the remaining lag series are left out and counted as dropped."""
    registry = registry_for([shard_with_group()], max_lag_series=2)
    lag_samples = [
        s
        for family in text_string_to_metric_families(_exposition(registry))
        if family.name == "kcoord_consumer_lag"
        for s in family.samples
    ]
    assert len(lag_samples) == 2
    assert registry.get_sample_value("kcoord_consumer_lag_series_dropped") == 1


def test_group_views_list_and_describe() -> None:
    """The JSON views list every group and describe members, decoded assignments, lag and history."""
    shard = shard_with_group()
    (summary,) = list_groups([shard])
    assert summary == {
        "group": "g",
        "state": "Stable",
        "protocol_type": "consumer",
        "members": 2,
        "generation": 1,
        "rebalances": 1,
    }
    view = describe_group([shard], "g", lambda t, p: LOG_END.get((t, p)))
    assert view is not None
    assert len(view["members"]) == 2
    assert [o["lag"] for o in view["offsets"]] == [6, 0, 0]
    (record,) = view["history"]
    assert record["trigger"] == "initial" and record["outcome"] == "stable"
    assert record["total_ms"] == record["join_ms"] + record["sync_ms"]
    assert describe_group([shard], "nope", lambda t, p: None) is None


def test_request_and_exchange_observers_feed_the_contract_metrics() -> None:
    """Answered requests count by API, version and error name; commits and fetched bytes are counted."""
    metrics = KcoordMetrics()
    metrics.observe_request(11, 9, 27, 0.01)
    assert (
        metrics.registry.get_sample_value(
            "kcoord_requests_total", {"api": "JoinGroup", "version": "9", "error": "REBALANCE_IN_PROGRESS"}
        )
        == 1
    )
    commit = {"topics": [{"name": "t", "partitions": [{"error_code": 0}, {"error_code": 22}]}]}
    metrics.observe_exchange(8, None, commit)
    fetch = {"responses": [{"topic": "t", "partitions": [{"records": b"x" * 10}, {"records": None}]}]}
    metrics.observe_exchange(1, None, fetch)
    assert metrics.registry.get_sample_value("kcoord_offset_commits_total") == 1
    assert metrics.registry.get_sample_value("kcoord_fetch_bytes_total") == 10


def _exposition(registry: CollectorRegistry) -> str:
    from prometheus_client import generate_latest

    return generate_latest(registry).decode()
