"""Rebalance scenarios on a manual clock: joins, leaves, expiries, static members, replay."""

from __future__ import annotations

from classic_harness import REBALANCE_MS, SESSION_MS, Harness, form_group, subscription

from kcoord.coordinator.classic import (
    ClassicGroupConfig,
    ClassicGroupManager,
    ClassicGroupState,
    LeavingMember,
    RebalanceRecord,
)
from kcoord.coordinator.classic.timer_keys import join_key, session_key, sync_key
from kcoord.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
)
from kcoord.protocol.errors import ErrorCode

E = ErrorCode


def test_two_members_within_initial_delay_make_one_rebalance() -> None:
    """Two members joining within the initial delay form generation 1 in a single rebalance."""
    h = Harness()
    a, a_sink = h.new_member()
    assert isinstance(h.records[0].value, GroupMetadataValue) and h.records[0].value.generation == 0
    h.advance(1_000)
    b, b_sink = h.new_member()
    h.advance(2_000)  # first delay (3 s) passes, but a new member arrived: extended
    assert a_sink not in h.answers
    h.advance(3_000)
    a_answer, b_answer = h.answers[a_sink], h.answers[b_sink]
    assert (a_answer.generation_id, b_answer.generation_id) == (1, 1)
    assert a_answer.leader == a and b_answer.leader == a
    assert [m.member_id for m in a_answer.members] == [a, b]
    assert b_answer.members == ()
    assert a_answer.protocol_name == "range"
    (rebalance,) = h.manager.rebalance_history("g")
    assert rebalance.trigger == "initial"
    assert rebalance.generation_after == 1
    assert h.state() == "CompletingRebalance"


def test_initial_delay_never_passes_rebalance_timeout() -> None:
    """New members extend the initial delay, but never past the group's rebalance timeout."""
    h = Harness()
    _, first = h.new_member(rebalance_ms=7_000)
    for _ in range(10):
        h.advance(1_000)
        h.new_member(rebalance_ms=7_000)
        if first in h.answers:
            break
    assert first in h.answers
    assert h.now <= 7_000


def test_sync_completes_with_one_record_and_releases_parked_followers() -> None:
    """The leader's SyncGroup writes one GroupMetadata record and answers the parked follower too."""
    h = Harness()
    a, b = form_group(h, sync=False)
    before = len(h.records)
    b_sink, parked = h.sync(b, 1)
    assert parked is None
    _result_sink, leader_answer = h.sync(a, 1, assignments=((a, b"A"),))
    assert len(h.records) == before + 1
    record = h.records[-1]
    assert isinstance(record.value, GroupMetadataValue)
    assert {m.member_id: m.assignment for m in record.value.members} == {a: b"A", b: b""}
    assert leader_answer.assignment == b"A"
    assert h.answers[b_sink].assignment == b""  # left out by the leader: empty bytes
    assert h.state() == "Stable"
    assert h.manager.rebalance_history("g")[-1].outcome == "stable"


def test_third_member_joins_stable_group() -> None:
    """A third member rebalances a Stable group; it completes once everyone rejoined."""
    h = Harness()
    a, b = form_group(h)
    c, c_sink = h.new_member(reason="scale out")
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(a, 1) is E.rebalance_in_progress
    a_sink, _ = h.join(a)
    b_sink, _ = h.join(b)
    assert all(sink in h.answers for sink in (a_sink, b_sink, c_sink))
    assert h.answers[a_sink].generation_id == 2
    assert h.answers[a_sink].leader == a
    assert [m.member_id for m in h.answers[a_sink].members] == [a, b, c]
    rebalance = h.manager.rebalance_history("g")[-1]
    assert rebalance.trigger == "member_joined"
    assert "scale out" in rebalance.client_reasons


def test_member_leaves() -> None:
    """A leaving member triggers a rebalance that completes when the rest rejoined."""
    h = Harness()
    a, b = form_group(h)
    response = h.leave(LeavingMember(b, reason="shutting down"))
    assert response.members[0].error_code is E.none
    assert h.state() == "PreparingRebalance"
    _a_sink, answer = h.join(a)
    assert answer.generation_id == 2 and [m.member_id for m in answer.members] == [a]
    rebalance = h.manager.rebalance_history("g")[-1]
    assert rebalance.trigger == "member_left"
    assert any("shutting down" in reason for reason in rebalance.client_reasons)
    assert h.heartbeat(b, 2) is E.unknown_member_id


def test_last_member_leaving_empties_group_with_record() -> None:
    """When the last member leaves, the generation is bumped, the group is Empty and written."""
    h = Harness()
    (a,) = form_group(h, 1)
    h.leave(LeavingMember(a))
    assert h.state() == "Empty"
    value = h.records[-1].value
    assert isinstance(value, GroupMetadataValue)
    assert (value.generation, value.members, value.protocol) == (2, (), None)


def test_session_expiry_removes_silent_member() -> None:
    """A member that stops heartbeating is removed when its session expires."""
    h = Harness()
    a, _b = form_group(h)
    for _ in range(3):
        h.advance(3_000)
        assert h.heartbeat(a, 1) is E.none
    h.advance(SESSION_MS - 9_000)
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(a, 1) is E.rebalance_in_progress
    assert h.manager.rebalance_history("g")[-1].trigger == "member_expired"
    _, answer = h.join(a)
    assert answer.generation_id == 2 and [m.member_id for m in answer.members] == [a]


def test_heartbeat_moves_deadline_without_cancelling() -> None:
    """A heartbeat reschedules the same session key; it never cancels and re-creates it."""
    h = Harness()
    a, _ = form_group(h)
    key = session_key("g", a)
    h.advance(2_000)
    h.heartbeat(a, 1)
    assert h.timer.deadline(key) == h.now + SESSION_MS
    assert key not in h.timer.cancelled


def test_slow_member_removed_at_rebalance_timeout() -> None:
    """A member that keeps heartbeating but never rejoins is dropped at the rebalance timeout."""
    h = Harness()
    a, b = form_group(h)
    a_sink, _ = h.join(a)  # the leader rejoins: rebalance
    elapsed = 0
    while a_sink not in h.answers:
        assert h.heartbeat(b, 1) is E.rebalance_in_progress
        h.advance(3_000)
        elapsed += 3_000
    assert elapsed >= REBALANCE_MS
    assert [m.member_id for m in h.answers[a_sink].members] == [a]
    rebalance = h.manager.rebalance_history("g")[-1]
    assert rebalance.trigger == "leader_rejoined"
    assert rebalance.removed_not_rejoined == [b]
    assert h.heartbeat(b, 1) is E.unknown_member_id


def test_rebalance_timeout_is_maximum_over_members() -> None:
    """The join deadline uses the largest rebalance timeout among the members."""
    h = Harness()
    a, _ = form_group(h)
    h.join(a, rebalance_ms=50_000)
    assert h.timer.deadline(join_key("g")) == h.now + 50_000


def test_pending_member_blocks_join_until_it_expires() -> None:
    """A MEMBER_ID_REQUIRED id blocks join completion until its session timeout removes it."""
    h = Harness()
    a, b = form_group(h)
    _, first = h.join()  # c is now pending
    assert first.error_code is E.member_id_required
    a_sink, _ = h.join(a)
    _b_sink, _ = h.join(b)
    assert a_sink not in h.answers  # waiting for the pending id
    h.advance(SESSION_MS)
    assert h.answers[a_sink].generation_id == 2
    assert [m.member_id for m in h.answers[a_sink].members] == [a, b]


def test_new_member_join_times_out() -> None:
    """A new member's parked join is answered UNKNOWN_MEMBER_ID after the new-member timeout."""
    h = Harness(ClassicGroupConfig(new_member_join_timeout_ms=7_000))
    form_group(h)
    c, c_sink = h.new_member()
    h.advance(7_000)
    assert h.answers[c_sink].error_code is E.unknown_member_id
    assert h.heartbeat(c, 1) is E.unknown_member_id


def test_pending_sync_timer_removes_members_that_never_sync() -> None:
    """KAFKA-12890: members that never send SyncGroup are removed and the group rebalances."""
    h = Harness()
    a, b = form_group(h, sync=False)
    h.sync(a, 1, assignments=((a, b"A"), (b, b"B")))
    assert h.state() == "Stable"
    for _ in range(REBALANCE_MS // 3_000):  # both stay alive; b just never syncs
        h.advance(3_000)
        if h.state() == "Stable":
            assert h.heartbeat(a, 1) is E.none
            assert h.heartbeat(b, 1) is E.none
    assert h.state() == "PreparingRebalance"
    assert h.manager.rebalance_history("g")[-2].removed_not_synced == [b]
    assert h.heartbeat(b, 1) is E.unknown_member_id


def test_sync_from_all_members_cancels_pending_sync_timer() -> None:
    """Once every member sent SyncGroup the pending-sync deadline is gone."""
    h = Harness()
    form_group(h)
    assert h.timer.deadline(sync_key("g")) is None


def test_rebalance_during_completing_fails_parked_syncs() -> None:
    """A new member during CompletingRebalance answers parked syncs with REBALANCE_IN_PROGRESS."""
    h = Harness()
    _, b = form_group(h, sync=False)
    b_sink, _ = h.sync(b, 1)
    h.new_member()
    assert h.answers[b_sink].error_code is E.rebalance_in_progress
    assert h.state() == "PreparingRebalance"


def test_static_member_restart_without_rebalance() -> None:
    """A static follower rejoining with an empty id gets a new id; no rebalance, old id fenced."""
    h = Harness()
    a, b = form_group(h, instances=True)
    before = len(h.records)
    _, answer = h.join(instance="i1")
    assert answer.error_code is E.none
    assert answer.member_id != b and answer.generation_id == 1
    assert answer.skip_assignment is False and answer.members == ()
    assert h.state() == "Stable"
    assert len(h.records) == before + 1
    value = h.records[-1].value
    assert isinstance(value, GroupMetadataValue)
    assert {m.member_id for m in value.members} == {a, answer.member_id}
    assert h.heartbeat(b, 1, instance="i1") is E.fenced_instance_id
    assert h.heartbeat(answer.member_id, 1, instance="i1") is E.none
    _, synced = h.sync(answer.member_id, 1, instance="i1")
    assert synced.assignment == f"assignment-{b}".encode()


def test_static_leader_restart_gets_skip_assignment_on_v9() -> None:
    """A static leader that restarts with unchanged protocols is told to skip assignment (v9+)."""
    h = Harness()
    _a, _ = form_group(h, instances=True)
    _, answer = h.join(instance="i0", version=9)
    assert answer.skip_assignment is True
    assert answer.leader == answer.member_id
    assert len(answer.members) == 2


def test_static_leader_restart_before_v9_keeps_old_leader_id() -> None:
    """Before v9 the restarted static leader is told the old leader id so it does not reassign."""
    h = Harness()
    a, _ = form_group(h, instances=True)
    _, answer = h.join(instance="i0", version=8)
    assert answer.skip_assignment is False
    assert answer.leader == a and answer.members == ()


def test_static_member_with_new_protocol_rebalances() -> None:
    """A static rejoin whose protocols change the selected protocol triggers a rebalance."""
    h = Harness()
    form_group(h, instances=True)
    h.join(instance="i1", protocols=(("range", subscription("orders")), ("sticky", b"")))
    assert h.state() == "Stable"  # range is still everyone's common choice
    h2 = Harness()
    form_group(h2, 1, instances=True)
    _, answer = h2.join(instance="i0", protocols=(("sticky", b""), ("range", subscription("orders"))))
    assert answer.protocol_name == "sticky" and answer.generation_id == 2
    assert h2.state() == "CompletingRebalance"


def test_static_member_rejoin_in_completing_forces_rebalance() -> None:
    """KAFKA-9801: a static rejoin with an empty id during CompletingRebalance restarts the rebalance."""
    h = Harness()
    form_group(h, instances=True, sync=False)
    h.join(instance="i1")
    assert h.state() == "PreparingRebalance"
    assert h.manager.rebalance_history("g")[-1].trigger == "static_member_replaced"


def test_static_member_is_kept_when_it_does_not_rejoin() -> None:
    """Static members are not dropped at join completion even if they did not rejoin."""
    h = Harness()
    a, b = form_group(h, instances=True)
    a_sink, _ = h.join(a, instance="i0")
    while a_sink not in h.answers:
        assert h.heartbeat(b, 1, instance="i1") is E.rebalance_in_progress
        h.advance(3_000)
    answer = h.answers[a_sink]
    assert answer.generation_id == 2
    assert {m.member_id for m in answer.members} == {a, b}


def test_admin_removes_static_member_by_instance_id() -> None:
    """LeaveGroup with an empty member id and a known instance id removes that static member."""
    h = Harness()
    _, b = form_group(h, instances=True)
    response = h.leave(LeavingMember("", "i1"))
    assert response.members[0].error_code is E.none
    assert h.heartbeat(b, 1, instance="i1") is E.unknown_member_id
    unknown = h.leave(LeavingMember("", "nope"))
    assert unknown.members[0].error_code is E.unknown_member_id


def test_protocol_selected_by_votes() -> None:
    """The protocol supported by everyone with the most first-preference votes wins."""
    h = Harness(ClassicGroupConfig(initial_rebalance_delay_ms=0))
    rr, rg = ("roundrobin", b"r"), ("range", b"g")
    h.join(protocols=(rr, rg), version=3)
    h.join(protocols=(rg, rr), version=3)
    sink, _ = h.join(protocols=(rg, rr, ("sticky", b"s")), version=3)
    h.advance(0)
    assert h.answers[sink].protocol_name == "range"


def test_inconsistent_protocols_are_rejected() -> None:
    """A joiner with another protocol type or no common protocol gets INCONSISTENT_GROUP_PROTOCOL."""
    h = Harness()
    form_group(h)
    assert h.join(protocols=(("roundrobin", b""),))[1].error_code is E.inconsistent_group_protocol
    assert h.join(protocol_type="connect")[1].error_code is E.inconsistent_group_protocol
    assert Harness().join(protocol_type="")[1].error_code is E.inconsistent_group_protocol


def test_group_max_size_reached() -> None:
    """A new member beyond group.max.size is rejected with GROUP_MAX_SIZE_REACHED."""
    h = Harness(ClassicGroupConfig(max_size=1))
    form_group(h, 1)
    assert h.join(version=3)[1].error_code is E.group_max_size_reached


def test_session_timeout_bounds() -> None:
    """Session timeouts outside [min, max] are INVALID_SESSION_TIMEOUT."""
    h = Harness()
    assert h.join(session_ms=5_999)[1].error_code is E.invalid_session_timeout
    assert h.join(session_ms=1_800_001)[1].error_code is E.invalid_session_timeout
    assert h.join(group="")[1].error_code is E.invalid_group_id


def test_unload_fails_parked_requests_with_not_coordinator() -> None:
    """Unloading answers parked joins and syncs with NOT_COORDINATOR and marks groups Dead."""
    h = Harness()
    _, b = form_group(h, sync=False)
    sync_sink, _ = h.sync(b, 1)
    h2 = Harness()
    _, join_sink = h2.new_member()
    h.absorb(h.manager.unload())
    h2.absorb(h2.manager.unload())
    assert h.answers[sync_sink].error_code is E.not_coordinator
    assert h2.answers[join_sink].error_code is E.not_coordinator
    assert h.state() == "Dead" and h2.timer.deadlines == {}


def test_replay_rebuilds_stable_group() -> None:
    """A GroupMetadata record rebuilds a Stable group whose members' sessions are armed."""
    h = Harness()
    h.now = 50_000
    member = MemberMetadata("m1", "i1", "client", "/10.0.0.1", -1, 12_000, subscription("t1"), b"asg")
    record = CoordinatorRecord(
        GroupMetadataKey("g"), GroupMetadataValue("consumer", 7, "range", "m1", 40_000, (member,))
    )
    h.manager.replay(record)
    assert h.state() == "Stable"
    assert h.timer.deadlines == {}  # nothing is armed until the whole partition is loaded
    h.absorb(h.manager.on_loaded(h.now))
    assert h.timer.deadline(session_key("g", "m1")) == 62_000
    assert h.heartbeat("m1", 7, instance="i1") is E.none
    assert h.sync("m1", 7, instance="i1")[1].assignment == b"asg"
    assert h.manager.is_subscribed("g", "t1")
    assert not h.manager.is_subscribed("g", "t2")
    h.advance(20_000)
    assert h.state() == "Empty"  # the only member never came back


def test_replay_of_live_record_round_trips() -> None:
    """Replaying the record written at sync completion gives an equivalent group in a new shard."""
    h = Harness()
    form_group(h)
    other = Harness()
    for record in h.records:
        other.manager.replay(record)
    assert other.manager.describe_groups(["g"], 5) == h.manager.describe_groups(["g"], 5)


def test_replay_of_tombstone_removes_group() -> None:
    """A GroupMetadata tombstone removes the group."""
    h = Harness()
    form_group(h)
    h.manager.replay(CoordinatorRecord(GroupMetadataKey("g"), None))
    assert h.state() is None


def test_replay_of_empty_group() -> None:
    """A record without members rebuilds an Empty group."""
    manager = ClassicGroupManager(Harness().timer)
    manager.replay(
        CoordinatorRecord(GroupMetadataKey("g"), GroupMetadataValue("consumer", 3, None, None, 9, ()))
    )
    assert manager.group_state("g") == "Empty"
    assert manager.empty_since_ms("g") == 9
    assert not manager.is_subscribed("g", "any")


class RecordingObserver:
    """Collects what the manager reports."""

    def __init__(self) -> None:
        self.transitions: list[tuple[str, str, str]] = []
        self.finished: list[RebalanceRecord] = []

    def on_state_change(
        self, group_id: str, old: ClassicGroupState, new: ClassicGroupState, now_ms: int
    ) -> None:
        self.transitions.append((group_id, str(old), str(new)))

    def on_rebalance_finished(self, group_id: str, rebalance: RebalanceRecord) -> None:
        self.finished.append(rebalance)


def test_observer_sees_transitions_and_finished_rebalances() -> None:
    """The observer hook is told every state transition and every finished rebalance."""
    h = Harness()
    observer = RecordingObserver()
    h.manager = ClassicGroupManager(h.timer, ClassicGroupConfig(), observer, new_uuid=lambda: "x")
    form_group(h, 1)
    assert [t[2] for t in observer.transitions] == ["PreparingRebalance", "CompletingRebalance", "Stable"]
    (finished,) = observer.finished
    assert (finished.outcome, finished.generation_after, finished.members_after) == ("stable", 1, ("c-x",))
    assert finished.join_completed_ms is not None and finished.completed_ms is not None


def test_duplicate_parked_sync_answers_the_older_request() -> None:
    """A second SyncGroup from the same parked member releases the first with REBALANCE_IN_PROGRESS."""
    h = Harness()
    _, b = form_group(h, sync=False)
    first, _ = h.sync(b, 1)
    second, _ = h.sync(b, 1)
    assert h.answers[first].error_code is E.rebalance_in_progress
    assert second not in h.answers
