"""Online migration of a live group between the classic and the consumer protocol (Kafka 4).

The shard is driven directly with a dict timer and a manual clock: classic members form a group,
a ConsumerGroupHeartbeat upgrades it, the classic members go on with JoinGroup/SyncGroup/Heartbeat
inside the consumer group, the last consumer-protocol member leaves and the group is classic again.
Every step checks that no partition is ever held by two members, and replaying the records in a
fresh shard rebuilds the same group.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from tests.coordinator.test_shard import DictTimer

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from kcoord.coordinator.classic.history import NullObserver
from kcoord.coordinator.classic.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kcoord.coordinator.consumer.config import ConsumerGroupConfig
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from kcoord.coordinator.consumer.persistence import TopicIds
from kcoord.coordinator.offsets import OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic
from kcoord.coordinator.record_codec import decode_value, encode_value
from kcoord.coordinator.records import (
    ClassicMemberMetadata,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
)
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.protocol.errors import KafkaError

START_MS = 1_000_000
TOPICS = {"orders": 4}
TOPIC_IDS = {name: uuid.uuid5(uuid.NAMESPACE_URL, name) for name in TOPICS}
GROUP = "g"


def _subscription(owned: tuple[tuple[str, tuple[int, ...]], ...] = ()) -> bytes:
    return encode_subscription(ConsumerSubscription(version=1, topics=("orders",), owned_partitions=owned))


class ConversionRecorder(NullObserver):
    """Keeps (group, kind it became, generation, members) for every conversion the shard reports."""

    def __init__(self) -> None:
        self.conversions: list[tuple[str, str, int, int]] = []

    def on_group_converted(self, group_id: str, into: str, generation: int, members: int) -> None:
        self.conversions.append((group_id, into, generation, members))


class Harness:
    def __init__(self, policy: str = "bidirectional") -> None:
        self.observer = ConversionRecorder()
        self.timer = DictTimer()
        self.now = START_MS
        self.policy = policy
        self.log: list[CoordinatorRecord] = []
        self.shard = self._new_shard()

    def _new_shard(self) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(
            self.timer,
            classic_config=ClassicGroupConfig(initial_rebalance_delay_ms=0),
            offset_metadata_max_bytes=4096,
            offsets_retention_ms=600_000,
            topic_exists=lambda topic, partition: 0 <= partition < TOPICS.get(topic, 0),
            consumer_config=ConsumerGroupConfig(migration_policy=self.policy, heartbeat_interval_ms=500),
            partition_count=TOPICS.get,
            topic_ids=TopicIds(TOPIC_IDS.get, {v: k for k, v in TOPIC_IDS.items()}.get),
            topic_names=lambda: tuple(TOPICS),
            observer=self.observer,
        )

    def apply(self, result: Any) -> dict[Any, Any]:
        self.shard.on_appended(list(result.records))
        self.log.extend(result.records)
        return dict(result.responses)

    def fire_due(self) -> dict[Any, Any]:
        answers: dict[Any, Any] = {}
        for key, deadline in sorted(self.timer.deadlines.items(), key=lambda item: item[1]):
            if deadline <= self.now and self.timer.deadlines.get(key) == deadline:
                del self.timer.deadlines[key]
                answers.update(self.apply(self.shard.on_timer(key, self.now)))
        return answers

    def restart(self) -> None:
        """A new shard replays the log, as loading a partition after a restart."""
        self.timer = DictTimer()
        self.shard = self._new_shard()
        for record in self.log:
            self.shard.replay(record)
        self.apply(self.shard.on_loaded(self.now))

    # -- classic requests

    def join(
        self,
        member_id: str = "",
        owned: tuple[tuple[str, tuple[int, ...]], ...] = (),
        version: int = 3,
        instance_id: str | None = None,
    ) -> JoinGroupResponse:
        request = JoinGroupRequest(
            group_id=GROUP,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type="consumer",
            protocols=(("range", _subscription(owned)), ("roundrobin", _subscription(owned))),
            session_timeout_ms=10_000,
            rebalance_timeout_ms=20_000,
            api_version=version,
            client_id="classic",
        )
        answers = self.apply(self.shard.join_group(request, ("join", member_id), self.now))
        answers.update(self.fire_due())
        response: JoinGroupResponse = answers[("join", member_id)]
        return response

    def sync(
        self, member_id: str, generation: int, assignments: tuple[tuple[str, bytes], ...] = ()
    ) -> SyncGroupResponse:
        request = SyncGroupRequest(
            group_id=GROUP,
            generation_id=generation,
            member_id=member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=assignments,
        )
        answers = self.apply(self.shard.sync_group(request, ("sync", member_id), self.now))
        response: SyncGroupResponse = answers[("sync", member_id)]
        return response

    def heartbeat(self, member_id: str, generation: int) -> ErrorCode:
        return self.shard.heartbeat_code(HeartbeatRequest(GROUP, generation, member_id), self.now, 1)

    def beat(
        self,
        member_id: str,
        epoch: int,
        owned: dict[str, frozenset[int]] | None = None,
        instance_id: str | None = None,
    ) -> ConsumerHeartbeatResponse:
        request = ConsumerHeartbeatRequest(
            group_id=GROUP,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance_id,
            subscribed_topics=("orders",) if epoch == 0 else None,
            owned=owned if owned is not None else ({} if epoch == 0 else None),
            rebalance_timeout_ms=20_000 if epoch == 0 else -1,
        )
        answers = self.apply(self.shard.consumer_heartbeat(request, "beat", self.now))
        response: ConsumerHeartbeatResponse = answers["beat"]
        return response

    def commit(self, member_id: str, generation: int, partition: int, offset: int) -> ErrorCode:
        request = OffsetCommitRequest(
            group_id=GROUP,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            api_version=8,
            topics=[OffsetCommitTopic("orders", [OffsetCommitPartition(partition, offset)])],
        )
        answer = self.apply(self.shard.commit_offsets(request, "commit", self.now))["commit"]
        code: ErrorCode = answer.topics[0].partitions[0].error_code
        return code

    # -- views

    def owners(self) -> dict[int, list[str]]:
        """Who holds each partition (assigned or pending revocation) in the consumer group."""
        held: dict[int, list[str]] = {}
        for member in self.shard.consumer.groups[GROUP].members.values():
            for partition in member.owned().get("orders", frozenset()):
                held.setdefault(partition, []).append(member.member_id)
        return held


def _parts(assignment_bytes: bytes) -> set[int]:
    return {p for topic, parts in decode_assignment(assignment_bytes).assigned_partitions for p in parts}


def _assignment(*partitions: int) -> bytes:
    return encode_assignment(ConsumerAssignment(version=1, assigned_partitions=(("orders", partitions),)))


def classic_group(h: Harness) -> tuple[str, str, int]:
    """Two classic members A (orders 0, 1) and B (2, 3), Stable, with committed offsets."""
    first = h.join()
    assert first.error_code == ErrorCode.none
    a = first.member_id
    # B's join starts a new generation; A learns it from its heartbeat and rejoins.
    h.apply(
        h.shard.join_group(
            JoinGroupRequest(
                group_id=GROUP,
                member_id="",
                group_instance_id=None,
                protocol_type="consumer",
                protocols=(("range", _subscription()), ("roundrobin", _subscription())),
                session_timeout_ms=10_000,
                rebalance_timeout_ms=20_000,
                api_version=3,
            ),
            ("join", "b"),
            h.now,
        )
    )
    rejoined = h.join(a)
    generation = rejoined.generation_id
    b = next(m for m in h.shard.classic.group(GROUP).members if m != a)  # type: ignore[union-attr]
    assert (
        h.sync(a, generation, ((a, _assignment(0, 1)), (b, _assignment(2, 3)))).error_code == ErrorCode.none
    )
    assert _parts(h.sync(b, generation).assignment) == {2, 3}
    assert h.commit(a, generation, 0, 10) == ErrorCode.none
    assert h.commit(b, generation, 3, 30) == ErrorCode.none
    return a, b, generation


def test_a_live_classic_group_is_upgraded_keeping_members_assignments_and_offsets() -> None:
    """The heartbeat's records: the classic tombstone first, then the consumer group with A and B
    holding their classic partitions at the classic generation; C waits for released partitions."""
    h = Harness()
    a, b, generation = classic_group(h)
    mark = len(h.log)
    joined = h.beat("c", 0)
    records = h.log[mark:]
    assert records[0] == CoordinatorRecord(GroupMetadataKey(GROUP), None)
    assert any(r.key == ConsumerGroupMetadataKey(GROUP) for r in records)
    assert not h.shard.is_classic_group(GROUP)
    group = h.shard.consumer.groups[GROUP]
    assert group.group_epoch == generation + 1
    assert group.members[a].assigned == {"orders": frozenset({0, 1})}
    assert group.members[b].assigned == {"orders": frozenset({2, 3})}
    assert group.members[a].classic is not None
    described = h.shard.describe_consumer_group(GROUP)
    assert described is not None
    assert {m.member_id: m.uses_classic_protocol for m in described.members} == {a: True, b: True, "c": False}
    assert [bump.trigger for bump in described.history] == ["upgraded_from_classic", "member_joined"]
    assert joined.assignment == {}  # every partition is still held by a classic member
    assert all(len(holders) == 1 for holders in h.owners().values())
    fetched = h.shard.fetch_offsets(GROUP, None, False)
    assert {p.partition_index: p.committed_offset for t in fetched.topics for p in t.partitions} == {
        0: 10,
        3: 30,
    }


def test_parked_classic_joins_learn_to_rejoin_when_the_group_is_upgraded() -> None:
    """A JoinGroup parked in PreparingRebalance is answered REBALANCE_IN_PROGRESS by the upgrade."""
    h = Harness()
    a, _b, generation = classic_group(h)
    h.apply(
        h.shard.join_group(
            JoinGroupRequest(
                GROUP, a, None, "consumer", (("range", _subscription()),), 10_000, 20_000, api_version=3
            ),
            "parked",
            h.now,
        )
    )
    answers = h.apply(
        h.shard.consumer_heartbeat(
            ConsumerHeartbeatRequest(GROUP, "c", 0, subscribed_topics=("orders",), owned={}), "beat", h.now
        )
    )
    assert answers["parked"].error_code == ErrorCode.rebalance_in_progress
    assert answers["beat"].member_epoch == generation + 1


def test_classic_members_rejoin_and_hand_partitions_to_the_consumer_member() -> None:
    """Heartbeat says REBALANCE_IN_PROGRESS; the rejoin reconciles (eager: owns nothing), SyncGroup
    gives the server assignor's partitions, and the consumer member gets the released ones."""
    h = Harness()
    a, b, generation = classic_group(h)
    h.beat("c", 0)
    epoch = h.shard.consumer.groups[GROUP].group_epoch
    assert h.heartbeat(a, generation) == ErrorCode.rebalance_in_progress
    assert h.heartbeat(a, generation + 5) == ErrorCode.illegal_generation
    for member in (a, b):
        rejoined = h.join(member)
        assert rejoined.error_code == ErrorCode.none
        assert rejoined.generation_id == epoch and rejoined.leader == "" and rejoined.members == ()
        synced = h.sync(member, rejoined.generation_id)
        assert synced.error_code == ErrorCode.none
        assert _parts(synced.assignment) == set(
            h.shard.consumer.groups[GROUP].members[member].assigned["orders"]
        )
        assert all(len(holders) == 1 for holders in h.owners().values())
    got = h.beat("c", epoch)
    assert got.assignment is not None and len(got.assignment["orders"]) >= 1
    sizes = sorted(len(m.assigned.get("orders", ())) for m in h.shard.consumer.groups[GROUP].members.values())
    assert sizes == [1, 1, 2] and h.shard.consumer.groups[GROUP].state.value == "Stable"
    assert h.heartbeat(a, epoch) == ErrorCode.none


def test_a_cooperative_classic_member_revokes_before_its_epoch_moves() -> None:
    """Owning partitions it must give up, the member keeps its generation, is synced to what it
    keeps, is told to rejoin, and only after reporting the revocation reaches the new epoch."""
    h = Harness()
    a, b, generation = classic_group(h)
    h.beat("c", 0)
    group = h.shard.consumer.groups[GROUP]
    epoch = group.group_epoch
    # C's partitions come from A or B: the one whose target lost a partition must revoke it.
    giver = next(
        m for m in (a, b) if group.members[m].assigned["orders"] - group.target[m].get("orders", set())
    )
    owned = group.members[giver].assigned["orders"]
    target = group.target[giver].get("orders", frozenset())
    first = h.join(giver, owned=(("orders", tuple(sorted(owned))),))
    assert first.generation_id == generation
    kept = _parts(h.sync(giver, generation).assignment)
    assert kept == set(target & owned) and kept != set(owned)
    assert h.heartbeat(giver, generation) == ErrorCode.rebalance_in_progress
    second = h.join(giver, owned=(("orders", tuple(sorted(kept))),))
    assert second.generation_id == epoch


def test_a_new_classic_member_joins_a_consumer_group() -> None:
    """JoinGroup v4 without an id: MEMBER_ID_REQUIRED; with it: the server assignor's partitions."""
    h = Harness()
    h.beat("c", 0)
    required = h.join(version=5)
    assert required.error_code == ErrorCode.member_id_required and required.member_id
    joined = h.join(required.member_id, version=5)
    assert joined.error_code == ErrorCode.none
    synced = h.sync(joined.member_id, joined.generation_id)
    assert synced.error_code == ErrorCode.none
    epoch = h.shard.consumer.groups[GROUP].group_epoch
    c = h.shard.consumer.groups[GROUP].members["c"]
    revoking = h.beat("c", c.member_epoch, owned={"orders": frozenset(range(4))})
    assert revoking.member_epoch == c.member_epoch and revoking.assignment is not None
    beat = h.beat("c", c.member_epoch, owned=dict(revoking.assignment))
    assert beat.member_epoch == epoch
    assert all(len(holders) == 1 for holders in h.owners().values())
    # The classic member waits for what C gives up; its heartbeat says when to rejoin.
    assert h.heartbeat(joined.member_id, joined.generation_id) in (
        ErrorCode.none,
        ErrorCode.rebalance_in_progress,
    )
    again = h.join(joined.member_id, version=5)
    assert _parts(h.sync(joined.member_id, again.generation_id).assignment) == set(
        h.shard.consumer.groups[GROUP].target[joined.member_id]["orders"]
    )


def test_classic_requests_from_unknown_or_consumer_members_are_refused() -> None:
    """Heartbeat/SyncGroup for a consumer-protocol member or an unknown one: UNKNOWN_MEMBER_ID;
    a JoinGroup of another protocol type: INCONSISTENT_GROUP_PROTOCOL."""
    h = Harness()
    h.beat("c", 0)
    assert h.heartbeat("c", 1) == ErrorCode.unknown_member_id
    assert h.heartbeat("nobody", 1) == ErrorCode.unknown_member_id
    assert h.sync("c", 1).error_code == ErrorCode.unknown_member_id
    request = JoinGroupRequest(GROUP, "", None, "connect", (("x", b""),), 10_000, 10_000, api_version=3)
    answers = h.apply(h.shard.join_group(request, "join", h.now))
    assert answers["join"].error_code == ErrorCode.inconsistent_group_protocol


def test_a_classic_member_leaves_a_consumer_group() -> None:
    """LeaveGroup removes the classic member and bumps the group epoch; the group stays a consumer group."""
    h = Harness()
    a, _b, _ = classic_group(h)
    h.beat("c", 0)
    epoch = h.shard.consumer.groups[GROUP].group_epoch
    answers = h.apply(h.shard.leave_group(LeaveGroupRequest(GROUP, (LeavingMember(a),)), "leave", h.now))
    assert [m.error_code for m in answers["leave"].members] == [ErrorCode.none]
    assert a not in h.shard.consumer.groups[GROUP].members
    assert h.shard.consumer.groups[GROUP].group_epoch == epoch + 1


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    """Records: consumer tombstones, then a classic GroupMetadata at the epoch the classic members
    reconciled to (their heartbeats learn of the rebalance, not of a new generation) with their
    target assignments; the classic group rebalances and its members rejoin as usual."""
    h = Harness()
    a, b, _ = classic_group(h)
    h.beat("c", 0)
    epoch = h.shard.consumer.groups[GROUP].group_epoch
    for member in (a, b):
        assert h.sync(member, h.join(member).generation_id).error_code == ErrorCode.none
    mark = len(h.log)
    h.beat("c", -1)
    records = h.log[mark:]
    assert records[-1].key == GroupMetadataKey(GROUP)
    assert CoordinatorRecord(ConsumerGroupMetadataKey(GROUP), None) in records
    value = records[-1].value
    assert isinstance(value, GroupMetadataValue) and value.generation == epoch
    assert {m.member_id for m in value.members} == {a, b}
    written = [p for m in value.members for p in _parts(m.assignment)]
    assert (
        len(written) == len(set(written)) and len(written) >= 2
    )  # their targets; C's wait for the rebalance
    assert not h.shard.consumer.has_group(GROUP)
    group = h.shard.classic.group(GROUP)
    assert group is not None and group.state.value == "PreparingRebalance"
    assert h.heartbeat(a, epoch) == ErrorCode.rebalance_in_progress
    h.apply(
        h.shard.join_group(
            JoinGroupRequest(
                GROUP, b, None, "consumer", (("range", _subscription()),), 10_000, 20_000, api_version=3
            ),
            "b-join",
            h.now,
        )
    )
    rejoined = h.join(a)
    assert rejoined.error_code == ErrorCode.none and rejoined.generation_id == epoch + 1
    assert h.shard.list_groups(None)[0].group_type == "classic"


def test_each_change_of_group_kind_is_reported_to_the_observer() -> None:
    """The pure shard logs nothing itself: an upgrade and the downgrade after it reach its observer."""
    h = Harness()
    a, b, _ = classic_group(h)
    generation = h.shard.classic.group(GROUP).generation_id  # type: ignore[union-attr]
    h.beat("c", 0)
    epoch = h.shard.consumer.groups[GROUP].group_epoch
    for member in (a, b):
        h.sync(member, h.join(member).generation_id)
    h.beat("c", -1)
    assert h.observer.conversions == [(GROUP, "consumer", generation, 2), (GROUP, "classic", epoch, 2)]


def test_a_consumer_member_whose_session_expires_downgrades_the_group() -> None:
    """The downgrade also follows fencing by the session timer."""
    h = Harness()
    classic_group(h)
    h.beat("c", 0)
    h.now += 50_000
    h.timer.deadlines = {k: v for k, v in h.timer.deadlines.items() if k.endswith(":g:c")}
    h.fire_due()
    assert h.shard.is_classic_group(GROUP)


@pytest.mark.parametrize(
    ("policy", "upgrades", "downgrades"), [("upgrade", True, False), ("downgrade", False, True)]
)
def test_the_migration_policy_decides_each_direction(policy: str, upgrades: bool, downgrades: bool) -> None:
    """upgrade: no downgrade; downgrade: a live classic group refuses the heartbeat (GROUP_ID_NOT_FOUND)."""
    h = Harness(policy)
    classic_group(h)
    if not upgrades:
        with pytest.raises(KafkaError) as refused:
            h.beat("c", 0)
        assert refused.value.code == ErrorCode.group_id_not_found
        assert h.shard.is_classic_group(GROUP)
        return
    h.beat("c", 0)
    h.beat("c", -1)
    assert h.shard.consumer.has_group(GROUP) is not downgrades


def test_join_and_sync_timeouts_fence_a_classic_member() -> None:
    """A classic member that joined but never synced is removed after its rebalance timeout."""
    h = Harness()
    h.beat("c", 0)
    joined = h.join(h.join(version=5).member_id, version=5)
    h.now += 20_001
    h.timer.deadlines = {k: v for k, v in h.timer.deadlines.items() if k.startswith("consumer:sync")}
    h.fire_due()
    assert joined.member_id not in h.shard.consumer.groups[GROUP].members


def test_a_restart_replays_the_upgraded_group_with_its_classic_members() -> None:
    """After a reload the classic members keep their epochs, partitions and protocols: their
    heartbeats and SyncGroups are answered as before."""
    h = Harness()
    a, _b, _generation = classic_group(h)
    h.beat("c", 0)
    rejoined = h.join(a)
    h.sync(a, rejoined.generation_id)
    before = {
        m.member_id: (m.member_epoch, m.assigned, m.classic)
        for m in h.shard.consumer.groups[GROUP].members.values()
    }
    h.restart()
    after = {
        m.member_id: (m.member_epoch, m.assigned, m.classic)
        for m in h.shard.consumer.groups[GROUP].members.values()
    }
    assert after == before
    assert h.heartbeat(a, rejoined.generation_id) in (ErrorCode.none, ErrorCode.rebalance_in_progress)
    assert h.sync(a, rejoined.generation_id).error_code == ErrorCode.none


def test_a_restart_after_a_downgrade_loads_a_classic_group() -> None:
    """The consumer tombstones and the classic record replay into the classic group alone."""
    h = Harness()
    a, b, _ = classic_group(h)
    h.beat("c", 0)
    h.beat("c", -1)
    h.restart()
    assert h.shard.is_classic_group(GROUP) and not h.shard.consumer.has_group(GROUP)
    group = h.shard.classic.group(GROUP)
    assert group is not None and set(group.members) == {a, b}


def test_classic_member_metadata_is_a_tagged_field_of_the_member_record() -> None:
    """ConsumerGroupMemberMetadataValue keeps the classic protocols in tag 0 and reads them back."""
    value = ConsumerGroupMemberMetadataValue(
        instance_id=None,
        rack_id=None,
        client_id="c",
        client_host="/127.0.0.1",
        subscribed_topic_names=("orders",),
        subscribed_topic_regex=None,
        rebalance_timeout_ms=20_000,
        server_assignor=None,
        classic_member_metadata=ClassicMemberMetadata(10_000, (("range", b"\x00\x01"), ("roundrobin", b""))),
    )
    key = ConsumerGroupMemberMetadataKey(GROUP, "m")
    encoded = encode_value(value)
    assert encoded is not None
    assert decode_value(key, encoded) == value
    plain = ConsumerGroupMemberMetadataValue(None, None, "c", "h", ("orders",), None, 1, None)
    plain_bytes = encode_value(plain)
    assert plain_bytes is not None and decode_value(key, plain_bytes) == plain
    assert len(encoded) > len(plain_bytes)


def test_static_members_switch_protocols_in_place() -> None:
    """A static classic member is replaced at once by a consumer-protocol member with its instance
    id (no UNRELEASED_INSTANCE_ID, same partitions); rolled back to classic under that instance id,
    it leaves only classic members and the group is classic again."""
    h = Harness()
    h.beat("c", 0)
    static = h.join(instance_id="i-1")
    assert static.error_code == ErrorCode.none
    assert h.sync(static.member_id, static.generation_id).error_code == ErrorCode.none
    other = h.join(instance_id="i-2")
    assert h.sync(other.member_id, other.generation_id).error_code == ErrorCode.none
    h.beat("c", -1)  # the consumer-protocol member leaves: two classic members remain
    assert h.shard.is_classic_group(GROUP)
    # Classic again: rejoin, then roll i-1 to the consumer protocol.
    group = h.shard.classic.group(GROUP)
    assert group is not None and set(group.static_members) == {"i-1", "i-2"}
    h.restart()
    reloaded = h.shard.classic.group(GROUP)
    assert reloaded is not None
    before = _parts(reloaded.members[reloaded.static_members["i-1"]].assignment)
    upgraded = h.beat("n-1", 0, instance_id="i-1")
    held = h.shard.consumer.groups[GROUP].members["n-1"]
    assert upgraded.member_epoch == held.member_epoch and held.classic is None
    # It keeps its partitions (and may take the one the departed consumer member left free).
    assert before <= set(held.assigned.get("orders", ()))
    assert static.member_id not in h.shard.consumer.groups[GROUP].members
    # And back: a classic join with instance i-1 replaces the last consumer-protocol member.
    back = h.join(instance_id="i-1")
    assert back.error_code == ErrorCode.none
    assert h.shard.is_classic_group(GROUP)
