"""The HTTP views and Prometheus gauges show KIP-848 consumer groups beside classic ones."""

from __future__ import annotations

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.observability.collector import GroupCollector
from kcoord.observability.group_views import describe_group, list_groups
from tests.coordinator.test_online_migration import Harness, classic_group
from tests.coordinator.test_shard import TOPICS, ShardHarness


def _harness_with_a_consumer_group() -> ShardHarness:
    h = ShardHarness()
    h.shard = GroupCoordinatorShard(
        h.timer,
        classic_config=ClassicGroupConfig(),
        offset_metadata_max_bytes=4096,
        offsets_retention_ms=60_000,
        topic_exists=lambda topic, partition: 0 <= partition < TOPICS.get(topic, 0),
        partition_count=TOPICS.get,
    )
    request = ConsumerHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, subscribed_topics=("orders",), owned={}, client_id="c"
    )
    h.apply(h.shard.consumer_heartbeat(request, "beat", h.now))
    h.commit("classic-offsets", ("orders", 0, 1))
    return h


def test_views_list_and_describe_a_consumer_group() -> None:
    """/v1/groups lists it with its type; /v1/groups/g shows epochs, members and assignments."""
    h = _harness_with_a_consumer_group()
    listed = {g["group"]: g for g in list_groups([h.shard])}
    assert listed["g"]["type"] == "consumer" and listed["g"]["state"] == "Stable"
    assert "classic-offsets" in listed
    view = describe_group([h.shard], "g", lambda topic, partition: 10)
    assert view is not None
    assert view["group_epoch"] == view["assignment_epoch"] > 0
    (member,) = view["members"]
    assert member["client_id"] == "c" and member["protocol"] == "consumer"
    assert member["assignment"] == member["target_assignment"] == {"orders": [0, 1, 2]}
    assert [(b["trigger"], b["member_id"], b["reconcile_ms"]) for b in view["history"]] == [
        ("member_joined", "m", 0)
    ]


def test_gauges_count_consumer_groups_by_state() -> None:
    """kcoord_consumer_protocol_groups{state="Stable"} counts the group; its member is counted."""
    h = _harness_with_a_consumer_group()
    collector = GroupCollector(lambda: [h.shard], lambda topic, partition: 10, max_lag_series=100)
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in collector.collect()
        for sample in family.samples
    }
    assert samples[("kcoord_consumer_protocol_groups", (("state", "Stable"),))] == 1
    assert samples[("kcoord_consumer_protocol_groups", (("state", "Empty"),))] == 0
    assert samples[("kcoord_consumer_protocol_group_members", ())] == 1


def test_a_migrating_group_shows_which_protocol_each_member_speaks() -> None:
    """/v1/groups/g of an upgraded group: the classic members and the consumer-protocol one."""
    h = Harness()
    a, b, _ = classic_group(h)
    h.beat("c", 0)
    view = describe_group([h.shard], "g", lambda topic, partition: 100)
    assert view is not None and view["type"] == "consumer"
    protocols = {m["member_id"]: m["protocol"] for m in view["members"]}
    assert protocols == {a: "classic", b: "classic", "c": "consumer"}
