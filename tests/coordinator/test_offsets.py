"""Pure tests of the offset manager: commit, fetch, replay, OffsetDelete, DeleteGroups, expiry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.offset_expiry import DEFAULT_OFFSETS_RETENTION_MS
from kcoord.coordinator.offsets import (
    CommittedOffset,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetDeleteResponse,
    OffsetDeleteTopic,
    OffsetFetchPartitionResult,
    OffsetFetchTopic,
    OffsetManager,
)
from kcoord.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import ErrorCode, KafkaError

HOUR_MS = 3_600_000
SINK = object()


@dataclass
class FakeGroup:
    """Just enough of a classic group for the offset manager's questions."""

    state: str = "Empty"
    protocol_type: str | None = "consumer"
    generation: int = 0
    members: dict[str, str | None] = field(default_factory=dict)  # member id -> instance id
    subscribed: set[str] = field(default_factory=set)
    empty_since_ms: int | None = None


class FakeGroups:
    """A hand-written GroupView whose commit validation follows PROTOCOL.md §2.8 steps 2-7."""

    def __init__(self, **groups: FakeGroup) -> None:
        self.groups = dict(groups)
        self.validations: list[tuple[str, str, str | None, int, int, int]] = []

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        api_version: int,
        now_ms: int,
    ) -> None:
        self.validations.append((group_id, member_id, group_instance_id, generation_id, api_version, now_ms))
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                self.groups[group_id] = FakeGroup(protocol_type=None)
                return
            raise KafkaError(
                ErrorCode.group_id_not_found if api_version >= 9 else ErrorCode.illegal_generation
            )
        if group.state == "Dead":
            raise KafkaError(ErrorCode.coordinator_not_available)
        if generation_id < 0 and group.state == "Empty":
            return
        if generation_id >= 0 or member_id or group_instance_id:
            if member_id not in group.members:
                raise KafkaError(ErrorCode.unknown_member_id)
            if group.members[member_id] != group_instance_id:
                raise KafkaError(ErrorCode.fenced_instance_id)
            if generation_id != group.generation:
                raise KafkaError(ErrorCode.illegal_generation)
        else:
            raise KafkaError(ErrorCode.unknown_member_id)
        if group.state == "CompletingRebalance":
            raise KafkaError(ErrorCode.rebalance_in_progress)

    def group_state(self, group_id: str) -> str | None:
        group = self.groups.get(group_id)
        return None if group is None else group.state

    def protocol_type(self, group_id: str) -> str | None:
        group = self.groups.get(group_id)
        return None if group is None else group.protocol_type

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and topic in group.subscribed

    def empty_since_ms(self, group_id: str) -> int | None:
        group = self.groups.get(group_id)
        return group.empty_since_ms if group is not None and group.state == "Empty" else None

    def is_simple_or_missing(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is None or not group.protocol_type


def every_topic_exists(topic: str, partition: int) -> bool:
    return True


def commit_request(
    group_id: str = "g",
    offsets: dict[tuple[str, int], int] | None = None,
    *,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    api_version: int = 8,
    metadata: str | None = "",
    leader_epoch: int = -1,
    retention_time_ms: int = -1,
) -> OffsetCommitRequest:
    topics: dict[str, list[OffsetCommitPartition]] = {}
    for (topic, partition), offset in (offsets or {("t", 0): 10}).items():
        topics.setdefault(topic, []).append(OffsetCommitPartition(partition, offset, leader_epoch, metadata))
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[OffsetCommitTopic(name, partitions) for name, partitions in topics.items()],
        api_version=api_version,
        group_instance_id=instance_id,
        retention_time_ms=retention_time_ms,
    )


def commit_response(result: CoordinatorResult) -> OffsetCommitResponse:
    [(sink, response)] = result.responses
    assert sink is SINK
    assert isinstance(response, OffsetCommitResponse)
    return response


def codes(response: OffsetCommitResponse | OffsetDeleteResponse) -> dict[tuple[str, int], ErrorCode]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def apply(manager: OffsetManager, records: list[CoordinatorRecord]) -> None:
    """What the shell does once records are appended."""
    for record in records:
        manager.replay(record)


def commit_and_replay(
    manager: OffsetManager, groups: FakeGroups, request: OffsetCommitRequest, now_ms: int = 0
) -> OffsetCommitResponse:
    result = manager.commit(request, SINK, now_ms, groups, every_topic_exists)
    apply(manager, result.records)
    return commit_response(result)


def fetched(manager: OffsetManager, group_id: str, topic: str, partition: int) -> OffsetFetchPartitionResult:
    [topic_result] = manager.fetch(group_id, [OffsetFetchTopic(topic, [partition])]).topics
    [partition_result] = topic_result.partitions
    return partition_result


# ------------------------------------------------------------------ commit


def test_commit_returns_records_and_response_without_touching_state() -> None:
    """A commit yields one record per partition and its response, but fetch sees nothing until replay."""
    manager, groups = OffsetManager(), FakeGroups()
    request = commit_request(offsets={("t", 0): 5, ("t", 1): 7, ("u", 0): 9}, metadata="m", leader_epoch=3)
    result = manager.commit(request, SINK, 1_000, groups, every_topic_exists)
    assert result.records == [
        CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, 3, "m", 1_000, -1)),
        CoordinatorRecord(OffsetCommitKey("g", "t", 1), OffsetCommitValue(7, 3, "m", 1_000, -1)),
        CoordinatorRecord(OffsetCommitKey("g", "u", 0), OffsetCommitValue(9, 3, "m", 1_000, -1)),
    ]
    assert set(codes(commit_response(result)).values()) == {ErrorCode.none}
    assert fetched(manager, "g", "t", 0).committed_offset == -1
    apply(manager, result.records)
    assert fetched(manager, "g", "t", 0) == OffsetFetchPartitionResult(0, 5, 3, "m")


def test_commit_passes_the_request_identity_to_the_group_validator() -> None:
    """The validator receives group, member, instance, generation, api version and time unchanged."""
    groups = FakeGroups(g=FakeGroup(state="Stable", generation=4, members={"m1": "i1"}))
    request = commit_request(generation=4, member_id="m1", instance_id="i1", api_version=7)
    response = commit_and_replay(OffsetManager(), groups, request, now_ms=42)
    assert groups.validations == [("g", "m1", "i1", 4, 7, 42)]
    assert codes(response) == {("t", 0): ErrorCode.none}


def test_commit_retention_time_becomes_expire_timestamp() -> None:
    """OffsetCommit v2-4 retention_time_ms is stored as commit time + retention; -1 stores none."""
    manager, groups = OffsetManager(), FakeGroups()
    result = manager.commit(commit_request(retention_time_ms=5_000), SINK, 1_000, groups, every_topic_exists)
    [record] = result.records
    assert isinstance(record.value, OffsetCommitValue)
    assert record.value.expire_timestamp == 6_000


def test_commit_null_metadata_is_stored_as_empty_string() -> None:
    """A null committed_metadata is stored and fetched as the empty string."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(manager, groups, commit_request(metadata=None))
    assert fetched(manager, "g", "t", 0).metadata == ""


def test_unknown_topic_partition_is_rejected_alone() -> None:
    """Partitions the broker does not host get UNKNOWN_TOPIC_OR_PARTITION; the others are committed."""
    manager, groups = OffsetManager(), FakeGroups()
    request = commit_request(offsets={("t", 0): 1, ("t", 9): 2, ("gone", 0): 3})
    result = manager.commit(request, SINK, 0, groups, lambda topic, partition: topic == "t" and partition < 4)
    assert codes(commit_response(result)) == {
        ("t", 0): ErrorCode.none,
        ("t", 9): ErrorCode.unknown_topic_or_partition,
        ("gone", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert [r.key for r in result.records] == [OffsetCommitKey("g", "t", 0)]


def test_all_partitions_unknown_skips_group_validation() -> None:
    """When no partition exists the group is not consulted (no simple group is created)."""
    manager, groups = OffsetManager(), FakeGroups()
    result = manager.commit(commit_request(), SINK, 0, groups, lambda topic, partition: False)
    assert codes(commit_response(result)) == {("t", 0): ErrorCode.unknown_topic_or_partition}
    assert groups.validations == []
    assert result.records == []


def test_group_error_goes_on_every_known_partition_and_writes_nothing() -> None:
    """A rejected group puts its code on each hosted partition; unknown ones keep their own code."""
    manager, groups = OffsetManager(), FakeGroups(g=FakeGroup(state="Dead"))
    request = commit_request(offsets={("t", 0): 1, ("t", 1): 2, ("x", 0): 3})
    result = manager.commit(request, SINK, 0, groups, lambda topic, partition: topic == "t")
    assert codes(commit_response(result)) == {
        ("t", 0): ErrorCode.coordinator_not_available,
        ("t", 1): ErrorCode.coordinator_not_available,
        ("x", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert result.records == []


@pytest.mark.parametrize(
    ("groups", "generation", "member_id", "instance_id", "api_version", "expected"),
    [
        pytest.param(FakeGroups(), -1, "", None, 8, ErrorCode.none, id="missing-group-simple-commit"),
        pytest.param(FakeGroups(), 3, "m", None, 8, ErrorCode.illegal_generation, id="missing-group-v8"),
        pytest.param(FakeGroups(), 3, "m", None, 9, ErrorCode.group_id_not_found, id="missing-group-v9"),
        pytest.param(
            FakeGroups(g=FakeGroup(state="Dead")),
            -1,
            "",
            None,
            8,
            ErrorCode.coordinator_not_available,
            id="dead",
        ),
        pytest.param(
            FakeGroups(g=FakeGroup(state="Empty")), -1, "stale", "inst", 8, ErrorCode.none, id="empty-admin"
        ),
        pytest.param(
            FakeGroups(g=FakeGroup(state="Stable", generation=2, members={"m": None})),
            2,
            "other",
            None,
            8,
            ErrorCode.unknown_member_id,
            id="unknown-member",
        ),
        pytest.param(
            FakeGroups(g=FakeGroup(state="Stable", generation=2, members={"m": "i"})),
            2,
            "m",
            "j",
            8,
            ErrorCode.fenced_instance_id,
            id="fenced-instance",
        ),
        pytest.param(
            FakeGroups(g=FakeGroup(state="Stable", generation=2, members={"m": None})),
            1,
            "m",
            None,
            8,
            ErrorCode.illegal_generation,
            id="old-generation",
        ),
        pytest.param(
            FakeGroups(g=FakeGroup(state="Stable", generation=2, members={"m": None})),
            -1,
            "",
            None,
            8,
            ErrorCode.unknown_member_id,
            id="no-generation-active-group",
        ),
        pytest.param(
            FakeGroups(g=FakeGroup(state="CompletingRebalance", generation=2, members={"m": None})),
            2,
            "m",
            None,
            8,
            ErrorCode.rebalance_in_progress,
            id="completing-rebalance",
        ),
        pytest.param(
            FakeGroups(g=FakeGroup(state="Stable", generation=2, members={"m": None})),
            2,
            "m",
            None,
            8,
            ErrorCode.none,
            id="member-of-stable-group",
        ),
    ],
)
def test_commit_validation_steps(
    groups: FakeGroups,
    generation: int,
    member_id: str,
    instance_id: str | None,
    api_version: int,
    expected: ErrorCode,
) -> None:
    """Each accept/deny step of §2.8 reaches the response, and only accepted commits become offsets."""
    manager = OffsetManager()
    request = commit_request(
        generation=generation, member_id=member_id, instance_id=instance_id, api_version=api_version
    )
    response = commit_and_replay(manager, groups, request)
    assert codes(response) == {("t", 0): expected}
    assert manager.group_offsets("g") == ({("t", 0): 10} if expected is ErrorCode.none else {})


def test_metadata_too_large_is_per_partition() -> None:
    """Metadata past the limit fails its own partition only; the limit counts UTF-16 code units."""
    manager, groups = OffsetManager(metadata_max_chars=4), FakeGroups()
    request = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        api_version=8,
        topics=[
            OffsetCommitTopic(
                "t",
                [
                    OffsetCommitPartition(0, 1, committed_metadata="abcd"),
                    OffsetCommitPartition(1, 2, committed_metadata="abcde"),
                    OffsetCommitPartition(2, 3, committed_metadata="ab😀"),
                    OffsetCommitPartition(3, 4, committed_metadata="abc😀"),
                ],
            )
        ],
    )
    response = commit_and_replay(manager, groups, request)
    assert codes(response) == {
        ("t", 0): ErrorCode.none,
        ("t", 1): ErrorCode.offset_metadata_too_large,
        ("t", 2): ErrorCode.none,
        ("t", 3): ErrorCode.offset_metadata_too_large,
    }
    assert manager.group_offsets("g") == {("t", 0): 1, ("t", 2): 3}


def test_default_metadata_limit_is_4096() -> None:
    """With the default settings 4096 characters pass and 4097 are too large."""
    manager, groups = OffsetManager(), FakeGroups()
    assert codes(commit_and_replay(manager, groups, commit_request(metadata="x" * 4096))) == {
        ("t", 0): ErrorCode.none
    }
    assert codes(commit_and_replay(manager, groups, commit_request(metadata="x" * 4097))) == {
        ("t", 0): ErrorCode.offset_metadata_too_large
    }


# ------------------------------------------------------------------ fetch and replay


def test_fetch_of_unknown_group_answers_minus_one_without_error() -> None:
    """An unknown group gets offset -1, epoch -1, metadata "" and no error on every partition."""
    response = OffsetManager().fetch("nobody", [OffsetFetchTopic("t", [0, 1])])
    assert response.error_code is ErrorCode.none
    assert [p for t in response.topics for p in t.partitions] == [
        OffsetFetchPartitionResult(0, -1, -1, "", ErrorCode.none),
        OffsetFetchPartitionResult(1, -1, -1, "", ErrorCode.none),
    ]


def test_fetch_all_of_unknown_group_is_empty() -> None:
    """topics=None for a group without offsets answers an empty topic list."""
    response = OffsetManager().fetch("nobody", None)
    assert response.group_id == "nobody"
    assert response.topics == []


def test_fetch_all_returns_every_offset_sorted_by_topic_and_partition() -> None:
    """topics=None returns all of the group's offsets, grouped by topic, in sorted order."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(manager, groups, commit_request(offsets={("b", 1): 11, ("a", 0): 1, ("b", 0): 10}))
    commit_and_replay(manager, groups, commit_request("other", {("a", 0): 99}))
    response = manager.fetch("g", None, require_stable=True)
    assert [
        (t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in response.topics
    ] == [
        ("a", [(0, 1)]),
        ("b", [(0, 10), (1, 11)]),
    ]


def test_fetch_mixes_known_and_unknown_partitions_in_request_order() -> None:
    """A named fetch answers in request order, -1 where nothing is committed."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(manager, groups, commit_request(offsets={("t", 1): 5}))
    [topic] = manager.fetch("g", [OffsetFetchTopic("t", [2, 1])]).topics
    assert [(p.partition_index, p.committed_offset) for p in topic.partitions] == [(2, -1), (1, 5)]


def test_later_commit_replaces_earlier() -> None:
    """Replaying a second commit for a partition overwrites offset, epoch and metadata."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(manager, groups, commit_request(offsets={("t", 0): 5}, metadata="a", leader_epoch=1))
    commit_and_replay(manager, groups, commit_request(offsets={("t", 0): 8}, metadata="b", leader_epoch=2), 9)
    assert fetched(manager, "g", "t", 0) == OffsetFetchPartitionResult(0, 8, 2, "b")
    assert manager.committed("g", "t", 0) == CommittedOffset(8, 2, "b", 9, -1)


def test_tombstone_replay_deletes_and_forgets_empty_groups() -> None:
    """A tombstone removes the offset; the group disappears once its last offset is gone."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(manager, groups, commit_request(offsets={("t", 0): 5, ("t", 1): 6}))
    manager.replay(CoordinatorRecord(OffsetCommitKey("g", "t", 0), None))
    assert manager.group_offsets("g") == {("t", 1): 6}
    manager.replay(CoordinatorRecord(OffsetCommitKey("g", "t", 1), None))
    assert manager.group_offsets("g") == {}
    assert not manager.has_offsets("g")
    assert manager.all_groups_with_offsets() == []
    manager.replay(CoordinatorRecord(OffsetCommitKey("g", "t", 1), None))
    assert fetched(manager, "g", "t", 1).committed_offset == -1


def test_replay_ignores_group_metadata_records() -> None:
    """Records of other types pass through replay without effect."""
    manager = OffsetManager()
    manager.replay(
        CoordinatorRecord(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, "range", "m", 0, ()))
    )
    manager.replay(CoordinatorRecord(GroupMetadataKey("g"), None))
    assert manager.all_groups_with_offsets() == []


def test_replay_rejects_a_mismatched_value() -> None:
    """An OffsetCommit key carrying a group metadata value is a codec bug and raises."""
    with pytest.raises(TypeError):
        OffsetManager().replay(
            CoordinatorRecord(
                OffsetCommitKey("g", "t", 0), GroupMetadataValue("consumer", 1, None, None, 0, ())
            )
        )


def test_all_groups_with_offsets_lists_groups_sorted() -> None:
    """The admin accessor lists every group holding offsets."""
    manager, groups = OffsetManager(), FakeGroups()
    for group_id in ("b", "a", "c"):
        commit_and_replay(manager, groups, commit_request(group_id))
    assert manager.all_groups_with_offsets() == ["a", "b", "c"]


# ------------------------------------------------------------------ OffsetDelete and DeleteGroups


def delete(
    manager: OffsetManager, groups: FakeGroups, topics: dict[str, list[int]]
) -> tuple[OffsetDeleteResponse, list[CoordinatorRecord]]:
    result = manager.delete_offsets("g", [OffsetDeleteTopic(t, ps) for t, ps in topics.items()], SINK, groups)
    [(sink, response)] = result.responses
    assert sink is SINK
    assert isinstance(response, OffsetDeleteResponse)
    return response, result.records


def test_offset_delete_of_missing_or_dead_group_is_group_id_not_found() -> None:
    """OffsetDelete of a group that does not exist (or is Dead) answers GROUP_ID_NOT_FOUND."""
    for groups in (FakeGroups(), FakeGroups(g=FakeGroup(state="Dead"))):
        response, records = delete(OffsetManager(), groups, {"t": [0]})
        assert response == OffsetDeleteResponse(ErrorCode.group_id_not_found, [])
        assert records == []


@pytest.mark.parametrize("state", ["Stable", "PreparingRebalance", "CompletingRebalance"])
def test_offset_delete_of_active_non_consumer_group_is_non_empty_group(state: str) -> None:
    """An active group whose protocol type is not consumer answers NON_EMPTY_GROUP."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(manager, groups, commit_request())
    groups.groups["g"] = FakeGroup(state=state, protocol_type="connect")
    response, records = delete(manager, groups, {"t": [0]})
    assert response.error_code is ErrorCode.non_empty_group
    assert records == []


def test_offset_delete_spares_subscribed_topics() -> None:
    """An active consumer group may delete offsets of topics it left, not of topics it reads."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(
        manager, groups, commit_request(offsets={("read", 0): 1, ("left", 0): 2, ("left", 1): 3})
    )
    groups.groups["g"] = FakeGroup(state="Stable", subscribed={"read"})
    response, records = delete(manager, groups, {"read": [0], "left": [0, 1, 7]})
    assert response.error_code is ErrorCode.none
    assert codes(response) == {
        ("read", 0): ErrorCode.group_subscribed_to_topic,
        ("left", 0): ErrorCode.none,
        ("left", 1): ErrorCode.none,
        ("left", 7): ErrorCode.none,
    }
    assert records == [
        CoordinatorRecord(OffsetCommitKey("g", "left", 0), None),
        CoordinatorRecord(OffsetCommitKey("g", "left", 1), None),
    ]
    apply(manager, records)
    assert manager.group_offsets("g") == {("read", 0): 1}


def test_offset_delete_of_simple_group_unknown_to_group_side_succeeds() -> None:
    """Offsets committed without membership make the group exist even if the group view has no entry."""
    manager = OffsetManager()
    commit_and_replay(manager, FakeGroups(), commit_request())
    response, records = delete(manager, FakeGroups(), {"t": [0]})
    assert response.error_code is ErrorCode.none
    assert records == [CoordinatorRecord(OffsetCommitKey("g", "t", 0), None)]


def test_delete_group_offsets_tombstones_every_offset() -> None:
    """DeleteGroups gets one tombstone per committed offset of that group only."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(manager, groups, commit_request(offsets={("t", 1): 1, ("t", 0): 2, ("a", 3): 3}))
    commit_and_replay(manager, groups, commit_request("keep"))
    records = manager.delete_group_offsets("g")
    assert records == [
        CoordinatorRecord(OffsetCommitKey("g", "a", 3), None),
        CoordinatorRecord(OffsetCommitKey("g", "t", 0), None),
        CoordinatorRecord(OffsetCommitKey("g", "t", 1), None),
    ]
    assert manager.has_offsets("g")
    apply(manager, records)
    assert manager.all_groups_with_offsets() == ["keep"]
    assert manager.delete_group_offsets("missing") == []


# ------------------------------------------------------------------ expiry


def expired_keys(
    manager: OffsetManager, now_ms: int, groups: FakeGroups, retention_ms: int = HOUR_MS
) -> set[tuple[str, str, int]]:
    records = manager.expire(now_ms, retention_ms, groups)
    assert all(record.value is None for record in records)
    return {
        (r.key.group, r.key.topic, r.key.partition) for r in records if isinstance(r.key, OffsetCommitKey)
    }


def test_empty_group_expires_from_when_it_became_empty() -> None:
    """An Empty consumer group loses all offsets one retention after it became Empty, not after the commit."""
    manager, groups = (
        OffsetManager(),
        FakeGroups(g=FakeGroup(state="Stable", generation=1, members={"m": None})),
    )
    commit_and_replay(manager, groups, commit_request(generation=1, member_id="m"), now_ms=0)
    groups.groups["g"] = FakeGroup(state="Empty", empty_since_ms=5 * HOUR_MS)
    assert expired_keys(manager, 6 * HOUR_MS - 1, groups) == set()
    assert expired_keys(manager, 6 * HOUR_MS, groups) == {("g", "t", 0)}


def test_empty_group_without_state_time_counts_from_commit() -> None:
    """An Empty group with no known state timestamp falls back to each commit's timestamp."""
    manager, groups = OffsetManager(), FakeGroups(g=FakeGroup(state="Empty", empty_since_ms=None))
    commit_and_replay(manager, groups, commit_request(offsets={("t", 0): 1}), now_ms=0)
    commit_and_replay(manager, groups, commit_request(offsets={("t", 1): 1}), now_ms=HOUR_MS)
    assert expired_keys(manager, HOUR_MS, groups) == {("g", "t", 0)}


def test_simple_group_expires_per_commit() -> None:
    """A simple group's offsets expire one by one, each a retention after its own commit."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(manager, groups, commit_request(offsets={("t", 0): 1}), now_ms=0)
    commit_and_replay(manager, groups, commit_request(offsets={("t", 1): 1}), now_ms=30 * 60_000)
    assert expired_keys(manager, HOUR_MS - 1, groups) == set()
    assert expired_keys(manager, HOUR_MS, groups) == {("g", "t", 0)}
    assert expired_keys(manager, 90 * 60_000, groups) == {("g", "t", 0), ("g", "t", 1)}


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    """A Stable consumer group keeps offsets of subscribed topics and ages the others from their commit."""
    manager = OffsetManager()
    groups = FakeGroups(g=FakeGroup(state="Stable", generation=1, members={"m": None}, subscribed={"keep"}))
    request = commit_request(offsets={("keep", 0): 1, ("left", 0): 2}, generation=1, member_id="m")
    commit_and_replay(manager, groups, request, now_ms=0)
    assert expired_keys(manager, 100 * HOUR_MS, groups) == {("g", "left", 0)}


@pytest.mark.parametrize(
    "group",
    [
        FakeGroup(state="Stable", protocol_type="connect"),
        FakeGroup(state="PreparingRebalance"),
        FakeGroup(state="CompletingRebalance"),
        FakeGroup(state="Dead"),
    ],
)
def test_groups_without_expiry_condition_keep_offsets(group: FakeGroup) -> None:
    """Rebalancing, Dead and non-consumer active groups never lose offsets to expiry."""
    manager = OffsetManager()
    commit_and_replay(manager, FakeGroups(), commit_request(), now_ms=0)
    assert expired_keys(manager, 100 * HOUR_MS, FakeGroups(g=group)) == set()


def test_explicit_expire_timestamp_wins_over_retention() -> None:
    """A v1 record's expire timestamp decides, earlier or later than the broker retention."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(manager, groups, commit_request(offsets={("t", 0): 1}, retention_time_ms=10), now_ms=0)
    commit_and_replay(
        manager, groups, commit_request(offsets={("t", 1): 1}, retention_time_ms=3 * HOUR_MS), now_ms=0
    )
    assert expired_keys(manager, 10, groups) == {("g", "t", 0)}
    assert expired_keys(manager, 2 * HOUR_MS, groups) == {("g", "t", 0)}
    assert expired_keys(manager, 3 * HOUR_MS, groups) == {("g", "t", 0), ("g", "t", 1)}


def test_explicit_expire_timestamp_does_not_override_a_subscription() -> None:
    """Even with an expire timestamp, an offset of a subscribed topic is kept."""
    manager = OffsetManager()
    commit_and_replay(manager, FakeGroups(), commit_request(retention_time_ms=10), now_ms=0)
    groups = FakeGroups(g=FakeGroup(state="Stable", subscribed={"t"}))
    assert expired_keys(manager, HOUR_MS, groups) == set()


def test_expiry_tombstones_replay_to_an_empty_shard() -> None:
    """Replaying expiry tombstones removes the offsets and the group from the shard."""
    manager, groups = OffsetManager(), FakeGroups()
    commit_and_replay(manager, groups, commit_request(offsets={("t", 0): 1, ("u", 2): 3}), now_ms=0)
    apply(manager, manager.expire(DEFAULT_OFFSETS_RETENTION_MS, DEFAULT_OFFSETS_RETENTION_MS, groups))
    assert manager.all_groups_with_offsets() == []


# ------------------------------------------------------------------ replay model


GROUP_IDS = st.sampled_from(["g1", "g2", "g3"])
TOPICS = st.sampled_from(["a", "b"])
PARTITIONS = st.integers(min_value=0, max_value=2)
COMMIT = st.tuples(
    st.just("commit"),
    GROUP_IDS,
    st.dictionaries(st.tuples(TOPICS, PARTITIONS), st.integers(0, 10**12), min_size=1, max_size=4),
    st.text(max_size=3),
)
DELETE_OFFSETS = st.tuples(st.just("delete"), GROUP_IDS, TOPICS, st.lists(PARTITIONS, max_size=3))
DELETE_GROUP = st.tuples(st.just("delete_group"), GROUP_IDS)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(COMMIT, DELETE_OFFSETS, DELETE_GROUP), max_size=25))
def test_replay_matches_a_dict_model(operations: list[Any]) -> None:
    """Replaying produced records in order answers fetches like a plain dict model, live and reloaded."""
    manager, groups = OffsetManager(), FakeGroups()
    model: dict[str, dict[tuple[str, int], tuple[int, str]]] = {}
    log: list[CoordinatorRecord] = []
    for now_ms, operation in enumerate(operations):
        if operation[0] == "commit":
            _, group_id, offsets, metadata = operation
            result = manager.commit(
                commit_request(group_id, offsets, metadata=metadata), SINK, now_ms, groups, every_topic_exists
            )
            records = result.records
            for tp, offset in offsets.items():
                model.setdefault(group_id, {})[tp] = (offset, metadata)
        elif operation[0] == "delete":
            _, group_id, topic, partitions = operation
            records = manager.delete_offsets(
                group_id, [OffsetDeleteTopic(topic, partitions)], SINK, groups
            ).records
            for partition in partitions:
                model.get(group_id, {}).pop((topic, partition), None)
        else:
            records = manager.delete_group_offsets(operation[1])
            model.pop(operation[1], None)
        apply(manager, records)
        log.extend(records)
    reloaded = OffsetManager()
    apply(reloaded, log)
    for shard in (manager, reloaded):
        assert shard.all_groups_with_offsets() == sorted(g for g, offsets in model.items() if offsets)
        for group_id in ("g1", "g2", "g3"):
            expected = model.get(group_id, {})
            answered = {
                (t.name, p.partition_index): (p.committed_offset, p.metadata)
                for t in shard.fetch(group_id, None).topics
                for p in t.partitions
            }
            assert answered == expected
            for topic in ("a", "b"):
                [topic_result] = shard.fetch(group_id, [OffsetFetchTopic(topic, [0, 1, 2])]).topics
                for p in topic_result.partitions:
                    assert (p.committed_offset, p.metadata) == expected.get(
                        (topic, p.partition_index), (-1, "")
                    )
