"""Describe, list and delete groups; what the offsets manager asks; the consumer protocol codec; keys."""

from __future__ import annotations

import pytest
from classic_harness import Harness, form_group, subscription

from kcoord.coordinator.classic import LeavingMember
from kcoord.coordinator.classic.consumer_protocol import (
    ConsumerAssignment,
    ConsumerProtocolError,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kcoord.coordinator.classic.timer_keys import (
    TimerTarget,
    join_key,
    parse_key,
    session_key,
    sync_key,
)
from kcoord.coordinator.offsets import GroupView
from kcoord.coordinator.records import GroupMetadataKey
from kcoord.protocol.errors import ErrorCode, KafkaError

E = ErrorCode


@pytest.mark.parametrize(("version", "expected"), [(5, E.none), (6, E.group_id_not_found)])
def test_describe_unknown_group(version: int, expected: ErrorCode) -> None:
    """An unknown group is described as Dead; error 0 before v6, GROUP_ID_NOT_FOUND from v6."""
    (described,) = Harness().manager.describe_groups(["nope"], version)
    assert (described.state, described.error_code) == ("Dead", expected)


def test_describe_stable_group_includes_metadata_and_assignment() -> None:
    """A Stable group is described with its protocol, members' metadata and assignments."""
    h = Harness()
    a, b = form_group(h)
    (described,) = h.manager.describe_groups(["g"], 5)
    assert (described.state, described.protocol_type, described.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert [m.assignment for m in described.members] == [
        b"assignment-" + a.encode(),
        b"assignment-" + b.encode(),
    ]
    assert all(m.metadata == subscription("orders") for m in described.members)
    assert described.members[0].client_host == "/127.0.0.1"


def test_describe_rebalancing_group_omits_metadata() -> None:
    """Outside Stable, members are listed without metadata or assignment."""
    h = Harness()
    form_group(h, sync=False)
    (described,) = h.manager.describe_groups(["g"], 5)
    assert described.state == "CompletingRebalance" and described.protocol_data == ""
    assert all(m.metadata == b"" and m.assignment == b"" for m in described.members)


def test_list_groups_with_state_filter() -> None:
    """ListGroups filters by state case-insensitively; no filter lists everything."""
    h = Harness()
    form_group(h, group="stable")
    form_group(h, group="rebalancing", sync=False)
    assert {g.group_id for g in h.manager.list_groups()} == {"stable", "rebalancing"}
    assert [g.group_id for g in h.manager.list_groups(["STABLE"])] == ["stable"]
    assert [g.state for g in h.manager.list_groups(["completingrebalance"])] == ["CompletingRebalance"]


def test_delete_groups() -> None:
    """DeleteGroups: NON_EMPTY_GROUP with members, GROUP_ID_NOT_FOUND when missing, else a tombstone."""
    h = Harness()
    (_a,) = form_group(h, 1, group="busy")
    (b,) = form_group(h, 1, group="idle")
    h.leave(LeavingMember(b), group="idle")
    refused = {}
    for group_id in ("busy", "ghost"):
        with pytest.raises(KafkaError) as raised:
            h.manager.validate_delete_group(group_id)
        refused[group_id] = raised.value.code
    assert refused == {"busy": E.non_empty_group, "ghost": E.group_id_not_found}
    h.manager.validate_delete_group("idle")
    records = h.manager.delete_group("idle")
    assert [(r.key, r.value) for r in records] == [(GroupMetadataKey("idle"), None)]
    assert h.manager.group_state("idle") is None


def test_offset_delete_validation_and_subscriptions() -> None:
    """OffsetDelete sees subscribed topics of a consumer group; non-consumer active groups are NON_EMPTY."""
    h = Harness()
    form_group(h)
    h.manager.validate_offset_delete("g")
    assert h.manager.is_subscribed("g", "orders")
    assert not h.manager.is_subscribed("g", "payments")
    with pytest.raises(KafkaError) as missing:
        h.manager.validate_offset_delete("ghost")
    assert missing.value.code is E.group_id_not_found
    other = Harness()
    other.join(protocol_type="connect", version=3)
    with pytest.raises(KafkaError) as busy:
        other.manager.validate_offset_delete("g")
    assert busy.value.code is E.non_empty_group


def test_manager_answers_what_the_offsets_manager_asks() -> None:
    """The manager is the offsets manager's GroupView: state, protocol type, Empty time, simple groups."""
    h = Harness()
    view: GroupView = h.manager
    (a,) = form_group(h, 1)
    assert (view.group_state("g"), view.protocol_type("g"), view.empty_since_ms("g")) == (
        "Stable",
        "consumer",
        None,
    )
    h.advance(1_000)
    h.leave(LeavingMember(a))
    assert view.group_state("g") == "Empty" and view.empty_since_ms("g") == h.now
    assert not view.is_simple_or_missing("g")
    assert view.is_simple_or_missing("ghost") and view.group_state("ghost") is None
    view.validate_offset_commit("simple", "", None, -1, 8, h.now)
    assert view.is_simple_or_missing("simple") and view.group_state("simple") == "Empty"


def test_commit_in_stable_group_keeps_session_alive() -> None:
    """A valid OffsetCommit in Stable moves the member's session deadline."""
    h = Harness()
    a, _ = form_group(h)
    h.advance(5_000)
    assert h.commit_error(a, 1) is E.none
    assert h.timer.deadline(session_key("g", a)) == h.now + 10_000


def test_history_is_bounded() -> None:
    """Only the last 32 rebalances are kept per group."""
    h = Harness()
    a, _ = form_group(h)
    for generation in range(1, 41):
        _, answer = h.join(a)  # the leader rejoins; b silently dropped after the first time
        if answer is None:
            h.advance(30_000)
        h.sync(a, generation + 1)
    assert len(h.manager.rebalance_history("g")) == 32


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip(version: int) -> None:
    """ConsumerProtocolSubscription encodes and decodes at each version."""
    subscription_value = ConsumerSubscription(
        version=version,
        topics=("a", "b"),
        user_data=b"u",
        owned_partitions=(("a", (0, 1)),) if version >= 1 else (),
        generation_id=4 if version >= 2 else -1,
        rack_id="r1" if version >= 3 else None,
    )
    assert decode_subscription(encode_subscription(subscription_value)) == subscription_value


def test_assignment_round_trip_and_future_version_prefix() -> None:
    """Assignments round-trip; a newer subscription version is read by its known prefix."""
    assignment = ConsumerAssignment(version=1, assigned_partitions=(("t", (2, 3)),), user_data=None)
    assert decode_assignment(encode_assignment(assignment)) == assignment
    future = encode_subscription(ConsumerSubscription(version=3, topics=("x",))) + b"\x00\x01"
    assert decode_subscription(b"\x00\x07" + future[2:]).topics == ("x",)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00\x00\x00\x05\x00\x01", b"\xff\xff"])
def test_malformed_subscription_raises(data: bytes) -> None:
    """Truncated or negative-version data raises ConsumerProtocolError."""
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


@pytest.mark.parametrize("group", ["g", "with:colons:", "", "ünï"])
def test_timer_keys_round_trip(group: str) -> None:
    """Timer keys parse back to their kind, group and member, whatever the ids contain."""
    assert parse_key(join_key(group)) == TimerTarget("join", group)
    assert parse_key(sync_key(group)) == TimerTarget("sync", group)
    assert parse_key(session_key(group, "m:1")) == TimerTarget("session", group, "m:1")
    assert parse_key("offsets:expire") is None
    assert parse_key("classic:join:99:g") is None
