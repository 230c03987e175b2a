"""Share groups in the group shard: one id namespace with classic and consumer groups, records
written through the offsets log's codec and replayed at load."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode
from tests.coordinator.test_shard import ShardHarness

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest
from kcoord.coordinator.consumer.persistence import TopicIds
from kcoord.coordinator.record_codec import encode_key, encode_value
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.coordinator.share.messages import ShareHeartbeatRequest, ShareHeartbeatResponse
from kcoord.protocol.errors import KafkaError
from kcoord.runtime.group_coordinator import GroupRecordSerde

TOPIC_ID = uuid.uuid5(uuid.NAMESPACE_URL, "queue")


def _shard(h: ShardHarness) -> GroupCoordinatorShard:
    ids = {"queue": TOPIC_ID}
    return GroupCoordinatorShard(
        h.timer,
        classic_config=ClassicGroupConfig(initial_rebalance_delay_ms=0),
        offset_metadata_max_bytes=4096,
        offsets_retention_ms=60_000,
        topic_exists=lambda topic, partition: True,
        partition_count=lambda topic: 1 if topic in ids else None,
        topic_ids=TopicIds(ids.get, {v: k for k, v in ids.items()}.get),
    )


def _beat(h: ShardHarness, member: str, epoch: int = 0) -> tuple[ShareHeartbeatResponse, list[object]]:
    request = ShareHeartbeatRequest("sg", member, epoch, subscribed_topic_names=("queue",))
    result = h.shard.share_heartbeat(request, "beat", h.now)
    records, answers = h.apply(result)
    answer: ShareHeartbeatResponse = answers["beat"]
    return answer, list(records)


def test_share_group_records_replay_into_the_same_groups_at_load() -> None:
    """Two members share the one partition; the records, encoded and decoded as the offsets log
    holds them, rebuild the same group in a fresh shard (what a restart does)."""
    h = ShardHarness()
    h.shard = _shard(h)
    first, records = _beat(h, "m1")
    second, more = _beat(h, "m2")
    assert first.assignment == ((TOPIC_ID, (0,)),) and second.assignment == ((TOPIC_ID, (0,)),)
    serde = GroupRecordSerde()
    loaded = _shard(ShardHarness())
    for record in records + more:
        key, value = record.key, record.value  # type: ignore[attr-defined]
        decoded = serde.decode(encode_key(key), encode_value(value))
        assert decoded == record
        loaded.replay(decoded, -1, -1, -1)
    assert loaded.describe_share_groups(["sg"]) == h.shard.describe_share_groups(["sg"])
    assert [g.group_type for g in loaded.list_groups(None)] == ["share"]


def test_other_kinds_refuse_a_share_group_id_and_it_refuses_theirs() -> None:
    """A consumer heartbeat to a share group is GROUP_ID_NOT_FOUND, as is a share heartbeat to a
    consumer group; DescribeGroups sees a share group as Dead, as Kafka 4.2."""
    h = ShardHarness()
    h.shard = _shard(h)
    _beat(h, "m1")
    beat = ConsumerHeartbeatRequest(
        group_id="sg", member_id="c1", member_epoch=0, subscribed_topics=("queue",), owned={}
    )
    with pytest.raises(KafkaError) as refused:
        h.shard.consumer_heartbeat(beat, "c", h.now)
    assert refused.value.code == ErrorCode.group_id_not_found
    h.apply(
        h.shard.consumer_heartbeat(
            ConsumerHeartbeatRequest("cg", "c1", 0, subscribed_topics=("queue",), owned={}), "c", h.now
        )
    )
    with pytest.raises(KafkaError) as other:
        h.shard.share_heartbeat(
            ShareHeartbeatRequest("cg", "m", 0, subscribed_topic_names=("queue",)), "s", h.now
        )
    assert other.value.code == ErrorCode.group_id_not_found
    assert h.shard.describe_group("sg", 6).error_code == ErrorCode.group_id_not_found


def test_deleting_a_share_group_needs_it_empty_and_answers_with_tombstones() -> None:
    """DeleteGroups: GROUP_NOT_EMPTY while a member remains, then the group's tombstones."""
    h = ShardHarness()
    h.shard = _shard(h)
    _beat(h, "m1")
    records, answers = h.apply(h.shard.delete_groups(["sg"], "del", h.now))
    assert [(a.group_id, a.error_code) for a in answers["del"]] == [("sg", ErrorCode.non_empty_group)]
    h.apply(h.shard.share_heartbeat(ShareHeartbeatRequest("sg", "m1", -1), "leave", h.now))
    records, answers = h.apply(h.shard.delete_groups(["sg"], "del", h.now))
    assert [(a.group_id, a.error_code) for a in answers["del"]] == [("sg", ErrorCode.none)]
    assert records and all(r.value is None for r in records)
    assert h.shard.list_groups(None) == []


def test_a_share_partition_with_state_is_recorded_as_initialized() -> None:
    """The first heartbeat records the subscribed partition as initializing; once the leader reports
    its durable state, ShareGroupStatePartitionMetadata holds it as initialized."""
    h = ShardHarness()
    h.shard = _shard(h)
    _beat(h, "m1")
    assert h.shard.share.initialized_partitions("sg") == {}
    records, _ = h.apply(h.shard.share_partition_initialized("sg", TOPIC_ID, 0))
    assert len(records) == 1
    assert h.shard.share.initialized_partitions("sg") == {TOPIC_ID: (0,)}
    again, _ = h.apply(h.shard.share_partition_initialized("sg", TOPIC_ID, 0))
    assert again == []
