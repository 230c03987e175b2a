"""The member reconciliation state machine of consumer groups (KIP-848), with a manual clock."""

from __future__ import annotations

import pytest
from consumer_harness import GROUP, REBALANCE_MS, SESSION_MS, Harness, pairs

from kcoord.coordinator.consumer.group import ConsumerGroupState
from kcoord.coordinator.consumer.member import MemberState
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest
from kcoord.coordinator.consumer.regex_subscriptions import INLINE_MATCH_CHARS
from kcoord.protocol.errors import ErrorCode, KafkaError


def _join(h: Harness, member_id: str, **kwargs: object) -> tuple[int, set[tuple[str, int]]]:
    response = h.beat(member_id, 0, topics=("orders",), owned={}, **kwargs)  # type: ignore[arg-type]
    return response.member_epoch, pairs(response.assignment)


def test_first_member_gets_everything_and_the_group_is_stable() -> None:
    """A lone member is assigned all partitions at once: epochs agree, the group is Stable."""
    h = Harness()
    epoch, assigned = _join(h, "a")
    assert assigned == {("orders", p) for p in range(6)}
    assert epoch == h.group.group_epoch == h.group.target_epoch
    assert h.group.state is ConsumerGroupState.STABLE


def test_generated_member_id_when_none_is_sent() -> None:
    """A v0 client joining without a member id gets one from the coordinator."""
    h = Harness()
    response = h.beat("", 0, topics=("orders",), owned={})
    assert response.member_id == "gen-0"


def test_revocation_before_reassignment() -> None:
    """A partition moves to a newcomer only after its owner reported it revoked."""
    h = Harness()
    epoch_a, owned_a = _join(h, "a")
    epoch_b, assigned_b = _join(h, "b")
    # b's target partitions are still a's: b is at the new epoch but gets nothing yet.
    assert assigned_b == set()
    assert h.group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert h.group.state is ConsumerGroupState.RECONCILING
    # a is told to keep only its share; its epoch stays until it revokes.
    response = h.beat("a", epoch_a, owned={"orders": frozenset(p for _, p in owned_a)})
    kept = pairs(response.assignment)
    assert len(kept) == 3 and response.member_epoch == epoch_a
    assert h.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # b still waits while a owns the revoked partitions.
    h.beat("b", epoch_b, owned={})
    assert h.group.members["b"].assigned == {}
    # a acknowledges: it moves to the new epoch, b then receives the released partitions.
    response = h.beat("a", epoch_a, owned={"orders": frozenset(p for _, p in kept)})
    assert response.member_epoch == epoch_b
    response_b = h.beat("b", epoch_b, owned={})
    assert pairs(response_b.assignment) == {("orders", p) for p in range(6)} - kept
    assert h.group.state is ConsumerGroupState.STABLE


def test_fencing_on_stale_and_future_epochs() -> None:
    """An epoch other than the member's current one (or its previous one, for a lost answer) is fenced."""
    h = Harness()
    epoch, _ = _join(h, "a")
    with pytest.raises(KafkaError) as future:
        h.beat("a", epoch + 1)
    assert future.value.code == ErrorCode.fenced_member_epoch
    _join(h, "b")
    response = h.beat("a", epoch, owned={"orders": frozenset(range(6))})
    h.beat("a", epoch, owned={"orders": frozenset(p for _, p in pairs(response.assignment))})
    new_epoch = h.group.members["a"].member_epoch
    assert new_epoch > epoch
    # The previous epoch with a subset of the assignment is a lost answer: accepted.
    again = h.beat("a", epoch, owned={"orders": frozenset(p for _, p in pairs(response.assignment))})
    assert again.member_epoch == new_epoch
    # The previous epoch claiming partitions it no longer has is fenced.
    with pytest.raises(KafkaError) as stale:
        h.beat("a", epoch, owned={"orders": frozenset(range(6))})
    assert stale.value.code == ErrorCode.fenced_member_epoch
    with pytest.raises(KafkaError) as unknown:
        h.beat("nobody", 3)
    assert unknown.value.code == ErrorCode.unknown_member_id


def test_heartbeat_to_missing_group_and_bad_requests() -> None:
    """Kafka's errors: GROUP_ID_NOT_FOUND for a non-join to no group, INVALID_REQUEST, bad assignor."""
    h = Harness()
    with pytest.raises(KafkaError) as missing:
        h.beat("a", 4)
    assert missing.value.code == ErrorCode.group_id_not_found
    with pytest.raises(KafkaError) as no_topics:
        h.beat("a", 0)
    assert no_topics.value.code == ErrorCode.invalid_request
    with pytest.raises(KafkaError) as assignor:
        h.beat("a", 0, topics=("orders",), assignor="sticky")
    assert assignor.value.code == ErrorCode.unsupported_assignor


def test_static_member_rejoins_with_its_assignment_and_no_rebalance() -> None:
    """Epoch -2 keeps the assignment; a new member id with the same instance id takes it over."""
    h = Harness()
    _join(h, "a", instance_id="i-a")
    _join(h, "b", instance_id="i-b")
    for _ in range(3):
        for member_id in ("a", "b"):
            m = h.group.members[member_id]
            h.beat(member_id, m.member_epoch, owned=m.assigned)
    assert h.group.state is ConsumerGroupState.STABLE
    held = pairs(h.group.members["a"].assigned)
    group_epoch = h.group.group_epoch
    assert h.beat("a", -2).member_epoch == -2
    with pytest.raises(KafkaError) as in_use:
        _join(h, "b2", instance_id="i-b")
    assert in_use.value.code == ErrorCode.unreleased_instance_id
    epoch, assigned = _join(h, "a2", instance_id="i-a")
    assert assigned == held
    assert h.group.group_epoch == group_epoch
    assert "a" not in h.group.members and h.group.state is ConsumerGroupState.STABLE
    assert epoch == h.group.target_epoch


def test_static_member_that_never_returns_expires() -> None:
    """A static member gone with epoch -2 is removed when its session times out."""
    h = Harness()
    _join(h, "a", instance_id="i-a")
    h.beat("a", -2)
    h.advance(SESSION_MS + 1)
    assert h.group.members == {}
    assert h.group.state is ConsumerGroupState.EMPTY


def test_session_expiry_during_reconciliation_releases_partitions() -> None:
    """A member that dies while revoking is fenced; its partitions go to the waiting member."""
    h = Harness()
    epoch_a, owned_a = _join(h, "a")
    _join(h, "b")
    h.beat("a", epoch_a, owned={"orders": frozenset(p for _, p in owned_a)})
    assert h.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(5):
        h.advance(SESSION_MS // 5)
        h.beat("b", h.group.members["b"].member_epoch, owned=h.group.members["b"].assigned)
    h.advance(1)
    assert "a" not in h.group.members
    last = h.beat("b", h.group.members["b"].member_epoch, owned=h.group.members["b"].assigned)
    assert pairs(h.group.members["b"].assigned) == {("orders", p) for p in range(6)}
    assert last.member_epoch == h.group.target_epoch


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    """A member that keeps heartbeating but never revokes is removed after its rebalance timeout."""
    h = Harness()
    epoch_a, owned_a = _join(h, "a")
    _join(h, "b")
    everything = {"orders": frozenset(p for _, p in owned_a)}
    h.beat("a", epoch_a, owned=everything)
    for _ in range(4):
        h.advance(REBALANCE_MS // 4)
        if "a" in h.group.members:
            h.beat("a", epoch_a, owned=everything)
    h.advance(1)
    assert "a" not in h.group.members
    with pytest.raises(KafkaError) as fenced:
        h.beat("a", epoch_a, owned=everything)
    assert fenced.value.code == ErrorCode.unknown_member_id


def test_leave_and_subscription_change_bump_the_group_epoch() -> None:
    """Epoch -1 removes the member; a new subscription or more partitions give a new group epoch."""
    h = Harness({"orders": 6, "payments": 2})
    epoch, _ = _join(h, "a")
    e1 = h.group.group_epoch
    response = h.beat("a", epoch, topics=("orders", "payments"), owned={"orders": frozenset(range(6))})
    assert h.group.group_epoch == e1 + 1
    assert ("payments", 1) in pairs(response.assignment)
    h.topics["orders"] = 8
    h.topics_changed("orders")
    assert h.group.group_epoch == e1 + 2
    response = h.beat("a", response.member_epoch, owned=h.group.members["a"].assigned)
    assert ("orders", 7) in pairs(response.assignment)
    del h.topics["payments"]
    h.topics_changed("payments")
    response = h.beat("a", response.member_epoch, owned=h.group.members["a"].assigned)
    assert h.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert (
        h.beat("a", response.member_epoch, owned={"orders": frozenset(range(8))}).member_epoch
        == h.group.target_epoch
    )
    assert h.beat("a", -1).member_epoch == -1
    assert h.group.state is ConsumerGroupState.EMPTY and h.manager.has_group(GROUP)


def test_offset_commit_epochs() -> None:
    """Commits need the member's current epoch: STALE_MEMBER_EPOCH (v9+) or ILLEGAL_GENERATION before."""
    h = Harness()
    epoch, _ = _join(h, "a")
    h.manager.validate_offset_commit(GROUP, "a", epoch, 9)
    with pytest.raises(KafkaError) as stale:
        h.manager.validate_offset_commit(GROUP, "a", epoch - 1, 9)
    assert stale.value.code == ErrorCode.stale_member_epoch
    with pytest.raises(KafkaError) as unknown:
        h.manager.validate_offset_commit(GROUP, "x", epoch, 9)
    assert unknown.value.code == ErrorCode.unknown_member_id
    with pytest.raises(KafkaError) as admin:
        h.manager.validate_offset_commit(GROUP, "", -1, 9)
    assert admin.value.code == ErrorCode.unknown_member_id


def test_closed_connection_shortens_a_dynamic_members_session() -> None:
    """Fast failover: the member's own connection closing leaves it about two heartbeat intervals."""
    h = Harness()
    _join(h, "a")
    _join(h, "s", instance_id="i-s")
    h.manager.note_connection(GROUP, "a", 7)
    h.manager.note_connection(GROUP, "s", 8)
    h.manager.member_disconnected(GROUP, "a", 6, h.now)  # not its connection: nothing
    h.manager.member_disconnected(GROUP, "s", 8, h.now)  # static members keep their session
    h.manager.member_disconnected(GROUP, "a", 7, h.now)
    h.advance(1_001)
    assert set(h.group.members) == {"s"}


def test_regex_subscription_follows_topic_creation_and_deletion() -> None:
    """A regex subscribes to every matching topic (whole name); new and deleted topics bump the epoch."""
    h = Harness({"orders-eu": 2, "orders-us": 2, "payments": 2})
    response = h.send(
        ConsumerHeartbeatRequest(
            group_id=GROUP, member_id="a", member_epoch=0, subscribed_topic_regex="orders-.*", owned={}
        )
    )
    assert pairs(response.assignment) == {
        ("orders-eu", 0),
        ("orders-eu", 1),
        ("orders-us", 0),
        ("orders-us", 1),
    }
    epoch = h.group.group_epoch
    h.topics["orders-asia"] = 1
    h.topics_changed("orders-asia")
    assert h.group.group_epoch > epoch
    response = h.beat("a", response.member_epoch, owned=h.group.members["a"].assigned)
    assert ("orders-asia", 0) in pairs(response.assignment)
    h.topics.pop("orders-eu")
    h.topics_changed("orders-eu")
    assert "orders-eu" not in h.group.subscribed_topics()
    with pytest.raises(KafkaError) as invalid:
        h.send(
            ConsumerHeartbeatRequest(
                group_id=GROUP, member_id="b", member_epoch=0, subscribed_topic_regex="(", owned={}
            )
        )
    assert invalid.value.code == ErrorCode.invalid_regular_expression


def test_a_regex_matched_off_the_turn_bumps_the_epoch_and_assigns_its_topics() -> None:
    """A new regex over a catalogue too long for the coordinator's turn joins with no topics; the
    job's result, fed back, resolves it, bumps the group epoch with its records, and the member's
    next heartbeat gets the matched topics' partitions."""
    many = {f"audit-{index:05d}": 1 for index in range(INLINE_MATCH_CHARS // 10)}
    h = Harness({"orders-eu": 2, "orders-us": 1, **many})
    joined = h.send(
        ConsumerHeartbeatRequest(
            group_id=GROUP, member_id="a", member_epoch=0, subscribed_topic_regex="orders-.*", owned={}
        )
    )
    assert pairs(joined.assignment) == set()
    (job,) = h.manager.regexes.take_jobs()
    epoch, written = h.group.group_epoch, len(h.records)
    h.records.extend(h.manager.on_regex_matched(job, job.run(), h.now).records)
    assert h.group.group_epoch == epoch + 1 and len(h.records) > written
    assert h.group.members["a"].regex_topics == {"orders-eu", "orders-us"}
    response = h.beat("a", joined.member_epoch, owned={})
    assert pairs(response.assignment) == {("orders-eu", 0), ("orders-eu", 1), ("orders-us", 0)}
    assert h.manager.on_regex_matched(job, job.run(), h.now).records == [], "a job counts once"


def test_after_a_load_a_regex_member_keeps_its_topics_while_its_regex_is_matched_again() -> None:
    """Loaded again (soft state gone) over a catalogue too long for the turn, a regex member keeps
    the topics of its records while the job runs: its heartbeat keeps its partitions, no new epoch."""
    many = {f"audit-{index:05d}": 1 for index in range(INLINE_MATCH_CHARS // 10)}
    h = Harness({"orders-eu": 2, **many})
    joined = h.send(
        ConsumerHeartbeatRequest(
            group_id=GROUP, member_id="a", member_epoch=0, subscribed_topic_regex="orders-.*", owned={}
        )
    )
    (job,) = h.manager.regexes.take_jobs()
    h.manager.on_regex_matched(job, job.run(), h.now)
    response = h.beat("a", joined.member_epoch, owned={})
    owned, epoch = response.assignment, h.group.group_epoch
    assert pairs(owned) == {("orders-eu", 0), ("orders-eu", 1)}

    group = h.group
    h.manager.unload()
    h.manager.groups[GROUP] = group  # the same state, as replaying its records rebuilds it
    h.manager.on_loaded(h.now)
    assert h.group.members["a"].regex_topics == {"orders-eu"}
    assert len(h.manager.regexes.take_jobs()) == 1
    again = h.beat("a", response.member_epoch, owned=owned)
    assert h.group.group_epoch == epoch and again.member_epoch == response.member_epoch


def test_strings_the_log_cannot_hold_are_refused() -> None:
    """A member id or topic name longer than a record string gets INVALID_REQUEST and changes nothing."""
    h = Harness()
    for member_id, topics in (("m" * 40_000, ("orders",)), ("m", ("t" * 40_000,))):
        with pytest.raises(KafkaError) as refused:
            h.beat(member_id, 0, topics=topics, owned={})
        assert refused.value.code == ErrorCode.invalid_request
    assert not h.manager.has_group(GROUP)
    assert h.records == []


def test_history_keeps_each_epoch_bump_with_its_trigger_and_reconcile_time() -> None:
    """Joins, a leave and a session expiry are kept in order; a bump gets its time once Stable."""
    h = Harness()
    a = h.beat("a", 0, topics=("orders",), owned={})
    b = h.beat("b", 0, topics=("orders",), owned={})
    h.now += 250
    kept = h.beat("a", a.member_epoch, owned=a.assignment).assignment
    h.now += 250
    h.beat("a", a.member_epoch, owned=kept)
    h.beat("b", b.member_epoch, owned={})
    assert h.group.state is ConsumerGroupState.STABLE
    h.beat("b", -1)
    h.advance(SESSION_MS + 1)
    bumps = h.manager.describe(GROUP).history  # type: ignore[union-attr]
    assert [(x.trigger, x.member_id) for x in bumps] == [
        ("member_joined", "a"),
        ("member_joined", "b"),
        ("member_left", "b"),
        ("session_expired", "a"),
    ]
    assert bumps[0].reconcile_ms == 0
    assert bumps[1].reconcile_ms == 500
    assert bumps[2].reconcile_ms is None
