"""The group coordinator shard: which records go where, DeleteGroups' record order, offset expiry.

The shard is pure, so these tests call it directly with a manual time and a dict timer, and play
the runtime's part themselves: records of a result are "appended" by handing them to
``on_appended`` before its responses are looked at.
"""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.messages import DeleteGroupResult, JoinGroupRequest
from kcoord.coordinator.offsets import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetDeleteResponse,
    OffsetDeleteTopic,
)
from kcoord.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.shard import GroupCoordinatorShard

RETENTION_MS = 60_000
START_MS = 1_000_000
TOPICS = {"orders": 3, "payments": 2}


class DictTimer:
    """Deadlines in a dict; the test fires them by hand."""

    def __init__(self) -> None:
        self.deadlines: dict[str, int] = {}

    def schedule(self, key: str, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms

    def cancel(self, key: str) -> None:
        self.deadlines.pop(key, None)

    def deadline(self, key: str) -> int | None:
        return self.deadlines.get(key)


class ShardHarness:
    def __init__(self) -> None:
        self.timer = DictTimer()
        self.now = START_MS
        self.shard = GroupCoordinatorShard(
            self.timer,
            classic_config=ClassicGroupConfig(initial_rebalance_delay_ms=0),
            offset_metadata_max_bytes=4096,
            offsets_retention_ms=RETENTION_MS,
            topic_exists=lambda topic, partition: 0 <= partition < TOPICS.get(topic, 0),
        )

    def apply(self, result: CoordinatorResult) -> tuple[list[CoordinatorRecord], dict[Any, Any]]:
        """What the runtime does: append (on_appended), then release; returns (records, answers)."""
        self.shard.on_appended(list(result.records))
        return list(result.records), dict(result.responses)

    def commit(self, group: str, *partitions: tuple[str, int, int]) -> Any:
        request = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            api_version=8,
            topics=[
                OffsetCommitTopic(topic, [OffsetCommitPartition(partition, offset)])
                for topic, partition, offset in partitions
            ],
        )
        _, answers = self.apply(self.shard.commit_offsets(request, "commit", self.now))
        return answers["commit"]

    def join(self, group: str) -> None:
        """A member joins ``group`` (JoinGroup v3: no member id round); its group is no longer empty."""
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
        self.apply(self.shard.join_group(request, "join", self.now))


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def offset_record(group: str, topic: str, partition: int, offset: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        OffsetCommitKey(group, topic, partition),
        OffsetCommitValue(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=START_MS),
    )


def group_record(group: str, generation: int, *members: str) -> CoordinatorRecord:
    return CoordinatorRecord(
        GroupMetadataKey(group),
        GroupMetadataValue(
            protocol_type="consumer",
            generation=generation,
            protocol="range" if members else None,
            leader=members[0] if members else None,
            current_state_timestamp=START_MS,
            members=tuple(
                MemberMetadata(m, None, "client", "/127.0.0.1", 30_000, 10_000, subscription("orders"), b"")
                for m in members
            ),
        ),
    )


def tombstone(group: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group, topic, partition), None)


def test_replay_sends_offset_records_to_offsets_and_group_records_to_groups() -> None:
    """Loading an OffsetCommit record fills the offsets; a GroupMetadata record rebuilds the group."""
    h = ShardHarness()
    h.shard.replay(offset_record("g", "orders", 1, 40))
    h.shard.replay(group_record("g", 7, "m-1"))
    h.shard.replay(group_record("idle", 2))
    committed = h.shard.offsets.committed("g", "orders", 1)
    assert committed is not None and committed.offset == 40
    assert h.shard.classic.generation_id("g") == 7
    assert str(h.shard.classic.group_state("g")) == "Stable"
    assert str(h.shard.classic.group_state("idle")) == "Empty"
    assert not h.shard.offsets.has_offsets("idle")


def test_replayed_tombstones_remove_offsets_and_groups() -> None:
    """A tombstone read while loading deletes what the earlier record of its key created."""
    h = ShardHarness()
    for record in (
        offset_record("g", "orders", 0, 1),
        group_record("g", 3, "m-1"),
        tombstone("g", "orders", 0),
        CoordinatorRecord(GroupMetadataKey("g"), None),
    ):
        h.shard.replay(record)
    assert not h.shard.offsets.has_offsets("g")
    assert not h.shard.classic.has_group("g")


def test_appended_offset_records_apply_but_group_records_do_not() -> None:
    """Live group records are already reflected in memory; on_appended applies only offset records."""
    h = ShardHarness()
    h.shard.on_appended([offset_record("g", "orders", 2, 9), group_record("other", 4, "m")])
    assert h.shard.offsets.group_offsets("g") == {("orders", 2): 9}
    assert not h.shard.classic.has_group("other")


def test_on_loaded_makes_a_simple_group_of_offsets_without_a_group_record() -> None:
    """After loading, a group known only from its offsets exists as an Empty group (so it can be deleted)."""
    h = ShardHarness()
    h.shard.replay(offset_record("offsets-only", "orders", 0, 3))
    h.shard.on_loaded(h.now)
    assert str(h.shard.classic.group_state("offsets-only")) == "Empty"
    result = h.shard.delete_groups(["offsets-only"], "delete", h.now)
    assert result.responses == [("delete", [DeleteGroupResult("offsets-only", ErrorCode.none)])]


def test_commit_writes_one_record_per_partition_and_rejects_unknown_partitions() -> None:
    """A commit becomes OffsetCommit records (applied once appended); a partition not hosted gets an error."""
    h = ShardHarness()
    request = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        api_version=8,
        topics=[
            OffsetCommitTopic("orders", [OffsetCommitPartition(0, 5), OffsetCommitPartition(9, 6)]),
            OffsetCommitTopic("missing", [OffsetCommitPartition(0, 7)]),
        ],
    )
    result = h.shard.commit_offsets(request, "sink", h.now)
    assert [r.key for r in result.records] == [OffsetCommitKey("g", "orders", 0)]
    assert h.shard.offsets.group_offsets("g") == {}, "nothing applied before the append"
    _, answers = h.apply(result)
    response: OffsetCommitResponse = answers["sink"]
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics] == [
        ("orders", [(0, ErrorCode.none), (9, ErrorCode.unknown_topic_or_partition)]),
        ("missing", [(0, ErrorCode.unknown_topic_or_partition)]),
    ]
    assert h.shard.offsets.group_offsets("g") == {("orders", 0): 5}


def test_delete_groups_tombstones_offsets_before_the_group_and_answers_per_group() -> None:
    """Per deletable group: its offsets' tombstones, then its own; missing and active groups get errors."""
    h = ShardHarness()
    h.commit("idle", ("payments", 1, 10), ("orders", 2, 20), ("orders", 0, 30))
    h.join("busy")
    result = h.shard.delete_groups(["idle", "nobody", "busy"], "delete", h.now)
    assert result.records == [
        tombstone("idle", "orders", 0),
        tombstone("idle", "orders", 2),
        tombstone("idle", "payments", 1),
        CoordinatorRecord(GroupMetadataKey("idle"), None),
    ]
    assert result.responses == [
        (
            "delete",
            [
                DeleteGroupResult("idle", ErrorCode.none),
                DeleteGroupResult("nobody", ErrorCode.group_id_not_found),
                DeleteGroupResult("busy", ErrorCode.non_empty_group),
            ],
        )
    ]
    h.apply(result)
    assert not h.shard.classic.has_group("idle") and not h.shard.offsets.has_offsets("idle")
    assert h.shard.classic.has_group("busy")


def test_expiry_deletes_an_empty_group_whose_offsets_all_expired() -> None:
    """When every offset of an Empty group expires, the group's tombstone follows its offsets' tombstones."""
    h = ShardHarness()
    h.commit("g", ("orders", 0, 1), ("orders", 1, 2))
    assert h.shard.expire_offsets(START_MS + RETENTION_MS - 1).records == []
    records, _ = h.apply(h.shard.expire_offsets(START_MS + RETENTION_MS))
    assert records == [
        tombstone("g", "orders", 0),
        tombstone("g", "orders", 1),
        CoordinatorRecord(GroupMetadataKey("g"), None),
    ]
    assert not h.shard.classic.has_group("g") and not h.shard.offsets.has_offsets("g")


def test_expiry_keeps_the_group_while_some_of_its_offsets_remain() -> None:
    """Only the expired offsets go; the group stays while a younger offset is left."""
    h = ShardHarness()
    h.commit("g", ("orders", 0, 1))
    h.now += 1_000
    h.commit("g", ("orders", 1, 2))
    records, _ = h.apply(h.shard.expire_offsets(START_MS + RETENTION_MS))
    assert records == [tombstone("g", "orders", 0)]
    assert h.shard.classic.has_group("g")
    assert h.shard.offsets.group_offsets("g") == {("orders", 1): 2}


def test_expiry_leaves_groups_with_members_alone() -> None:
    """A group with a member joining keeps its offsets and is never deleted by expiry."""
    h = ShardHarness()
    h.commit("g", ("payments", 0, 1))
    h.join("g")
    result = h.shard.expire_offsets(START_MS + 10 * RETENTION_MS)
    assert result.records == []
    assert h.shard.classic.has_group("g")


def test_delete_offsets_goes_to_the_offsets_of_the_group() -> None:
    """OffsetDelete on the shard tombstones the named partition of an Empty group's offsets."""
    h = ShardHarness()
    h.commit("g", ("orders", 0, 1), ("orders", 1, 2))
    records, answers = h.apply(h.shard.delete_offsets("g", [OffsetDeleteTopic("orders", [1])], "del", h.now))
    response: OffsetDeleteResponse = answers["del"]
    assert response.error_code == ErrorCode.none
    assert records == [tombstone("g", "orders", 1)]
    assert h.shard.offsets.group_offsets("g") == {("orders", 0): 1}
