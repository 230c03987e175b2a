"""Share group membership: ShareGroupHeartbeat epochs, joins, leaves, sessions, replay = live, admin views."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.group_records import (
    ShareGroupRecord,
    decode_share_group_record,
    encode_share_group_key,
    encode_share_group_value,
)
from kcoord.coordinator.share.manager import (
    ShareGroupManager,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
    session_key,
)
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.timer.clock import ManualClock

TOPIC_ID = uuid.UUID(int=5)
OTHER_ID = uuid.UUID(int=6)
SESSION_MS = 45_000


class DictTimer:
    """Keyed deadlines in a dict."""

    def __init__(self) -> None:
        self.deadlines: dict[str, int] = {}

    def schedule(self, key: str, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms

    def cancel(self, key: str) -> None:
        self.deadlines.pop(key, None)

    def deadline(self, key: str) -> int | None:
        return self.deadlines.get(key)

    def due(self, now_ms: int) -> list[str]:
        return sorted(k for k, d in self.deadlines.items() if d <= now_ms)


class Harness:
    def __init__(self, **settings: Any) -> None:
        self.clock = ManualClock(1_000)
        self.timer = DictTimer()
        self.topics: dict[str, tuple[uuid.UUID, int]] = {"orders": (TOPIC_ID, 1), "audit": (OTHER_ID, 3)}
        self.manager = ShareGroupManager(ShareGroupConfig(**settings), self.timer, self.topics.get)
        self.log: list[ShareGroupRecord] = []

    def beat(
        self, member: str, epoch: int, topics: tuple[str, ...] | None = ("orders",)
    ) -> ShareHeartbeatResponse:
        request = ShareHeartbeatRequest(
            "g", member, epoch, None, topics if epoch == 0 else None, "cid", "/127.0.0.1"
        )
        return self.respond(self.manager.heartbeat("sink", request, self.clock.now_ms()))

    def subscribe(self, member: str, epoch: int, topics: tuple[str, ...]) -> ShareHeartbeatResponse:
        request = ShareHeartbeatRequest("g", member, epoch, None, topics, "cid", "/127.0.0.1")
        return self.respond(self.manager.heartbeat("sink", request, self.clock.now_ms()))

    def take(self, result: CoordinatorResult) -> Any:
        self.log.extend(result.records)  # type: ignore[arg-type]
        return result.responses[0][1] if result.responses else None

    def respond(self, result: CoordinatorResult) -> ShareHeartbeatResponse:
        response: ShareHeartbeatResponse = self.take(result)
        return response

    def expire_sessions(self) -> None:
        for key in self.timer.due(self.clock.now_ms()):
            self.timer.cancel(key)
            result = self.manager.on_timer(key, self.clock.now_ms())
            assert result is not None
            self.take(result)

    def reloaded(self) -> ShareGroupManager:
        again = ShareGroupManager(ShareGroupConfig(), DictTimer(), self.topics.get)
        for record in self.log:
            decoded = decode_share_group_record(
                encode_share_group_key(record.key), encode_share_group_value(record.value)
            )
            assert decoded is not None
            again.replay(decoded)
        return again


def refused(
    harness: Harness, member: str, epoch: int, topics: tuple[str, ...] | None = ("orders",)
) -> ErrorCode:
    with pytest.raises(KafkaError) as error:
        harness.beat(member, epoch, topics)
    return error.value.code


def test_members_join_with_epoch_zero_and_share_the_one_partition() -> None:
    """Three members joining a one-partition topic each get partition 0 and the group's epoch."""
    h = Harness()
    first = h.beat("m1", 0)
    assert (first.member_epoch, first.assignment) == (1, ((TOPIC_ID, (0,)),))
    assert first.heartbeat_interval_ms == 5_000
    h.beat("m2", 0)
    third = h.beat("m3", 0)
    assert third.member_epoch == 3
    assert h.beat("m1", 1).member_epoch == 3
    described = h.manager.describe(["g"])[0]
    assert described.state == "Stable" and described.epoch == 3 and described.assignor == "simple"
    assert [(m.member_id, m.assignment) for m in described.members] == [
        (f"m{i}", ((TOPIC_ID, (0,)),)) for i in (1, 2, 3)
    ]


def test_a_steady_heartbeat_writes_nothing_and_omits_the_assignment() -> None:
    """With nothing new the heartbeat appends no record and answers assignment=None (unchanged)."""
    h = Harness()
    h.beat("m1", 0)
    written = len(h.log)
    steady = h.beat("m1", 1)
    assert (steady.member_epoch, steady.assignment, len(h.log)) == (1, None, written)


def test_bad_heartbeats_are_refused_with_kafkas_errors() -> None:
    """Empty member id, no topics on join, epochs below -1: INVALID_REQUEST; an unknown member:
    UNKNOWN_MEMBER_ID;
    a wrong epoch: FENCED_MEMBER_EPOCH."""
    h = Harness()
    assert refused(h, "", 0) == ErrorCode.invalid_request
    assert refused(h, "m1", 0, None) == ErrorCode.invalid_request
    assert refused(h, "m1", -2) == ErrorCode.invalid_request
    assert refused(h, "ghost", 3) == ErrorCode.unknown_member_id
    assert refused(h, "ghost", -1) == ErrorCode.unknown_member_id
    h.beat("m1", 0)
    h.beat("m2", 0)
    assert h.beat("m1", 1).member_epoch == 2
    assert h.beat("m1", 1).member_epoch == 2  # the previous epoch is still accepted (bump may have been lost)
    assert refused(h, "m1", 7) == ErrorCode.fenced_member_epoch


def test_the_group_max_size_is_enforced() -> None:
    """A new member beyond ``group.share.max.size`` gets GROUP_MAX_SIZE_REACHED."""
    h = Harness(max_size=2)
    h.beat("m1", 0)
    h.beat("m2", 0)
    assert refused(h, "m3", 0) == ErrorCode.group_max_size_reached


def test_leaving_bumps_the_epoch_and_the_others_get_the_new_target() -> None:
    """A leave (epoch -1) answers -1 and removes the member; another's next heartbeat gets a new target."""
    h = Harness()
    h.subscribe("m1", 0, ("audit",))
    h.subscribe("m2", 0, ("audit",))
    rebalanced = h.beat("m1", 1)
    assert (rebalanced.member_epoch, rebalanced.assignment) == (2, ((OTHER_ID, (0, 2)),))
    before = h.manager.describe(["g"])[0]
    assert sorted(p for m in before.members for p in m.assignment[0][1]) == [0, 1, 2]
    assert h.beat("m2", -1).member_epoch == -1
    after = h.beat("m1", 2)
    assert (after.member_epoch, after.assignment) == (3, ((OTHER_ID, (0, 1, 2)),))


def test_a_subscription_change_moves_the_member_to_its_new_topics() -> None:
    """New subscribed topic names bump the group epoch and the member's assignment follows."""
    h = Harness()
    h.beat("m1", 0)
    moved = h.subscribe("m1", 1, ("orders", "audit"))
    assert moved.member_epoch == 2
    assert moved.assignment == tuple(sorted(((TOPIC_ID, (0,)), (OTHER_ID, (0, 1, 2)))))


def test_new_partitions_of_a_subscribed_topic_are_assigned() -> None:
    """A topic that grew (or appeared) gives a new group epoch and target at the next heartbeat."""
    h = Harness()
    h.subscribe("m1", 0, ("orders", "later"))
    h.topics["orders"] = (TOPIC_ID, 2)
    h.topics["later"] = (OTHER_ID, 1)
    grown = h.beat("m1", 1)
    assert grown.member_epoch == 2
    assert grown.assignment == tuple(sorted(((TOPIC_ID, (0, 1)), (OTHER_ID, (0,)))))


def test_a_member_that_stops_heartbeating_is_removed_after_its_session_timeout() -> None:
    """Each heartbeat moves the session deadline; once it passes the member is removed, the epoch bumps."""
    h = Harness()
    h.beat("m1", 0)
    h.beat("m2", 0)
    assert h.timer.deadline(session_key("g", "m1")) == 1_000 + SESSION_MS
    h.clock.advance(SESSION_MS - 1)
    h.beat("m2", 2)
    h.clock.advance(1)
    h.expire_sessions()
    described = h.manager.describe(["g"])[0]
    assert [m.member_id for m in described.members] == ["m2"] and described.epoch == 3
    assert refused(h, "m1", 2) == ErrorCode.unknown_member_id
    assert h.manager.on_timer("consumer:session:1:g:x", h.clock.now_ms()) is None


def test_replaying_the_records_rebuilds_the_same_groups() -> None:
    """The records' bytes replayed into a fresh manager give the same describe (replay = live)."""
    h = Harness()
    h.beat("m1", 0)
    h.subscribe("m2", 0, ("orders", "audit"))
    h.beat("m1", 1)
    h.beat("m3", 0)
    h.beat("m3", -1)
    again = h.reloaded()
    assert again.describe(["g"]) == h.manager.describe(["g"])
    timer = DictTimer()
    loaded = ShareGroupManager(ShareGroupConfig(), timer, h.topics.get)
    for record in h.log:
        loaded.replay(record)
    loaded.on_loaded(5_000)
    assert timer.deadlines == {
        session_key("g", "m1"): 5_000 + SESSION_MS,
        session_key("g", "m2"): 5_000 + SESSION_MS,
    }


def test_list_describe_and_delete() -> None:
    """ListGroups shows type "share" and the state; an unknown group describes as GROUP_ID_NOT_FOUND;
    delete is refused while members remain and then tombstones the group."""
    h = Harness()
    h.beat("m1", 0)
    assert h.manager.list_groups() == [("g", "share", "Stable")]
    assert h.manager.list_groups(["Empty"]) == []
    assert h.manager.describe(["nope"])[0].error_code == ErrorCode.group_id_not_found
    with pytest.raises(KafkaError) as busy:
        h.manager.delete_group("g")
    assert busy.value.code == ErrorCode.non_empty_group
    h.beat("m1", -1)
    assert h.manager.list_groups(["empty"]) == [("g", "share", "Empty")]
    h.take(h.manager.delete_group("g"))
    assert not h.manager.has_group("g")
    assert not h.reloaded().has_group("g")
    with pytest.raises(KafkaError) as gone:
        h.manager.delete_group("g")
    assert gone.value.code == ErrorCode.group_id_not_found


def test_a_topic_that_grew_while_kcoord_was_down_is_noticed_after_a_reload() -> None:
    """The group metadata record keeps the subscribed topics' hash, so a reload followed by a heartbeat
    sees that a topic changed meanwhile and assigns the new partitions."""
    h = Harness()
    h.beat("m1", 0)
    h.topics["orders"] = (TOPIC_ID, 3)
    again = h.reloaded()
    request = ShareHeartbeatRequest("g", "m1", 1, None, None, "cid", "/127.0.0.1")
    response: ShareHeartbeatResponse = again.heartbeat("sink", request, 0).responses[0][1]
    assert (response.member_epoch, response.assignment) == (2, ((TOPIC_ID, (0, 1, 2)),))


def test_a_rack_or_client_change_is_recorded_without_a_new_epoch() -> None:
    """Member metadata that is not the subscription (rack, client) is written but moves no epoch."""
    h = Harness()
    h.beat("m1", 0)
    written = len(h.log)
    request = ShareHeartbeatRequest("g", "m1", 1, "rack-b", None, "cid", "/127.0.0.1")
    moved = h.respond(h.manager.heartbeat("sink", request, 0))
    assert (moved.member_epoch, moved.assignment, len(h.log)) == (1, None, written + 1)
    assert h.manager.describe(["g"])[0].members[0].rack_id == "rack-b"
