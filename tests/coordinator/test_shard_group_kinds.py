"""Classic and consumer groups in one shard: one id namespace, Kafka's errors across kinds, the upgrade."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from tests.coordinator.test_shard import ShardHarness, subscription

from kcoord.coordinator.classic.messages import HeartbeatRequest, JoinGroupRequest
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from kcoord.coordinator.offsets import OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic
from kcoord.coordinator.records import ConsumerGroupMetadataKey, GroupMetadataKey
from kcoord.protocol.errors import KafkaError


def _beat(h: ShardHarness, group: str, member: str, epoch: int) -> ConsumerHeartbeatResponse:
    request = ConsumerHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, subscribed_topics=("orders",), owned={}
    )
    _, answers = h.apply(h.shard.consumer_heartbeat(request, "beat", h.now))
    answer: ConsumerHeartbeatResponse = answers["beat"]
    return answer


def _classic_join(h: ShardHarness, group: str) -> None:
    request = JoinGroupRequest(
        group_id=group,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(("range", subscription("orders")),),
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        api_version=3,
    )
    h.apply(h.shard.join_group(request, "join", h.now))


def _without_migration() -> ShardHarness:
    """A shard with group.consumer.migration.policy=disabled: the kinds of group never mix."""
    from kcoord.coordinator.classic.config import ClassicGroupConfig
    from kcoord.coordinator.consumer.config import ConsumerGroupConfig
    from kcoord.coordinator.shard import GroupCoordinatorShard

    h = ShardHarness()
    h.shard = GroupCoordinatorShard(
        h.timer,
        classic_config=ClassicGroupConfig(initial_rebalance_delay_ms=0),
        offset_metadata_max_bytes=4096,
        offsets_retention_ms=60_000,
        topic_exists=lambda topic, partition: True,
        consumer_config=ConsumerGroupConfig(migration_policy="disabled"),
    )
    return h


def test_classic_requests_to_a_consumer_group_get_kafkas_errors() -> None:
    """Migration disabled: JoinGroup INCONSISTENT_GROUP_PROTOCOL; Heartbeat UNKNOWN_MEMBER_ID;
    DescribeGroups v6: not found."""
    h = _without_migration()
    _beat(h, "g", "m", 0)
    with pytest.raises(KafkaError) as join:
        _classic_join(h, "g")
    assert join.value.code == ErrorCode.inconsistent_group_protocol
    heartbeat = HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    assert h.shard.heartbeat_code(heartbeat, h.now, 1) == ErrorCode.unknown_member_id
    assert h.shard.describe_group("g", 6).error_code == ErrorCode.group_id_not_found
    assert h.shard.describe_group("g", 5).state == "Dead"
    listed = {g.group_id: g.group_type for g in h.shard.list_groups(None)}
    assert listed == {"g": "consumer"}


def test_consumer_heartbeat_to_a_live_classic_group_is_refused() -> None:
    """Migration disabled: a classic group with members is not a consumer group (GROUP_ID_NOT_FOUND)."""
    h = _without_migration()
    _classic_join(h, "g")
    with pytest.raises(KafkaError) as refused:
        _beat(h, "g", "m", 0)
    assert refused.value.code == ErrorCode.group_id_not_found


def test_an_empty_classic_group_is_upgraded_and_keeps_its_offsets() -> None:
    """Offsets committed under the classic protocol survive the upgrade; the classic record is deleted."""
    h = ShardHarness()
    h.commit("g", ("orders", 0, 42))
    assert h.shard.is_classic_group("g")
    request = ConsumerHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, subscribed_topics=("orders",), owned={}
    )
    records, _ = h.apply(h.shard.consumer_heartbeat(request, "beat", h.now))
    assert records[0].key == GroupMetadataKey("g") and records[0].value is None
    assert any(r.key == ConsumerGroupMetadataKey("g") for r in records)
    assert not h.shard.is_classic_group("g")
    fetched = h.shard.fetch_offsets("g", None, False)
    assert [(t.name, p.committed_offset) for t in fetched.topics for p in t.partitions] == [("orders", 42)]


def test_commits_to_a_consumer_group_check_the_member_epoch() -> None:
    """OffsetCommit v9 with a stale epoch: STALE_MEMBER_EPOCH on every partition, nothing written."""
    h = ShardHarness()
    answer = _beat(h, "g", "m", 0)

    def commit(epoch: int) -> ErrorCode:
        request = OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=epoch,
            member_id="m",
            api_version=9,
            topics=[OffsetCommitTopic("orders", [OffsetCommitPartition(0, 5)])],
        )
        _, answers = h.apply(h.shard.commit_offsets(request, "commit", h.now))
        return answers["commit"].topics[0].partitions[0].error_code  # type: ignore[no-any-return]

    assert commit(answer.member_epoch) == ErrorCode.none
    assert commit(answer.member_epoch + 1) == ErrorCode.stale_member_epoch


def test_migration_policy_disabled_refuses_the_upgrade() -> None:
    """With group.consumer.migration.policy=disabled an Empty classic group stays classic."""
    h = _without_migration()
    h.commit("g", ("orders", 0, 42))
    with pytest.raises(KafkaError) as refused:
        _beat(h, "g", "m", 0)
    assert refused.value.code == ErrorCode.group_id_not_found
    assert h.shard.is_classic_group("g")
