"""Hand-written fakes for the classic group tests: a dict timer and a harness with a manual clock."""

from __future__ import annotations

import itertools
from typing import Any

from kcoord.coordinator.classic import (
    ClassicGroupConfig,
    ClassicGroupManager,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
)
from kcoord.coordinator.classic.consumer_protocol import ConsumerSubscription, encode_subscription
from kcoord.coordinator.records import CoordinatorRecord
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import ErrorCode, KafkaError

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def subscription(*topics: str) -> bytes:
    return encode_subscription(ConsumerSubscription(version=1, topics=topics))


DEFAULT_PROTOCOLS = (("range", subscription("orders")),)


class FakeTimer:
    """Keyed deadlines in a dict; records every schedule and cancel so tests can inspect them."""

    def __init__(self) -> None:
        self.deadlines: dict[str, int] = {}
        self.cancelled: list[str] = []
        self.scheduled: list[tuple[str, int]] = []

    def schedule(self, key: str, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms
        self.scheduled.append((key, deadline_ms))

    def cancel(self, key: str) -> None:
        if self.deadlines.pop(key, None) is not None:
            self.cancelled.append(key)

    def deadline(self, key: str) -> int | None:
        return self.deadlines.get(key)

    def pop_due(self, now_ms: int) -> str | None:
        due = [(deadline, key) for key, deadline in self.deadlines.items() if deadline <= now_ms]
        if not due:
            return None
        _, key = min(due)
        del self.deadlines[key]
        return key


class Harness:
    """One shard's classic groups, a manual clock, and every answer and record seen so far."""

    def __init__(self, config: ClassicGroupConfig | None = None) -> None:
        self.timer = FakeTimer()
        self.now = 0
        counter = itertools.count()
        self.manager = ClassicGroupManager(
            self.timer, config or ClassicGroupConfig(), new_uuid=lambda: f"u{next(counter)}"
        )
        self.answers: dict[str, Any] = {}
        self.records: list[CoordinatorRecord] = []
        self._sinks = itertools.count()

    def absorb(self, result: CoordinatorResult) -> None:
        self.records.extend(result.records)
        for sink, response in result.responses:
            assert sink not in self.answers, f"sink {sink} answered twice"
            self.answers[sink] = response

    def sink(self, prefix: str) -> str:
        return f"{prefix}#{next(self._sinks)}"

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = DEFAULT_PROTOCOLS,
        protocol_type: str = "consumer",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        version: int = 9,
        reason: str | None = None,
        client_id: str = "c",
    ) -> tuple[str, Any]:
        """Send a JoinGroup; returns (sink, response or None while parked)."""
        sink = self.sink("join")
        request = JoinGroupRequest(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocols=protocols,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            reason=reason,
            client_id=client_id,
            client_host="/127.0.0.1",
            api_version=version,
        )
        self.absorb(self.manager.join_group(request, sink, self.now))
        return sink, self.answers.get(sink)

    def new_member(self, group: str = "g", **kwargs: Any) -> tuple[str, str]:
        """MEMBER_ID_REQUIRED handshake then a parked rejoin; returns (member id, join sink)."""
        _, first = self.join(group=group, **kwargs)
        assert first.error_code is ErrorCode.member_id_required
        sink, response = self.join(first.member_id, group=group, **kwargs)
        assert response is None
        return first.member_id, sink

    def sync(
        self,
        member_id: str,
        generation: int,
        *,
        group: str = "g",
        instance: str | None = None,
        assignments: tuple[tuple[str, bytes], ...] = (),
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> tuple[str, Any]:
        sink = self.sink("sync")
        request = SyncGroupRequest(
            group, generation, member_id, instance, protocol_type, protocol_name, assignments
        )
        self.absorb(self.manager.sync_group(request, sink, self.now))
        return sink, self.answers.get(sink)

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None
    ) -> ErrorCode:
        request = HeartbeatRequest(group, generation, member_id, instance)
        return self.manager.heartbeat_code(request, self.now)

    def leave(self, *members: LeavingMember, group: str = "g") -> Any:
        sink = self.sink("leave")
        self.absorb(self.manager.leave_group(LeaveGroupRequest(group, members), sink, self.now))
        return self.answers[sink]

    def commit_error(
        self,
        member_id: str,
        generation: int,
        *,
        group: str = "g",
        instance: str | None = None,
        version: int = 8,
    ) -> ErrorCode:
        try:
            self.manager.validate_offset_commit(group, member_id, instance, generation, version, self.now)
        except KafkaError as error:
            return error.code
        return ErrorCode.none

    def advance(self, ms: int) -> None:
        """Move the clock and fire every deadline that passed, in deadline order."""
        target = self.now + ms
        while (key := self.timer.pop_due(target)) is not None:
            self.absorb(self.manager.on_timer(key, target))
        self.now = target

    def state(self, group: str = "g") -> str | None:
        state = self.manager.group_state(group)
        return None if state is None else str(state)


def form_group(
    h: Harness, count: int = 2, *, group: str = "g", sync: bool = True, instances: bool = False
) -> list[str]:
    """Join ``count`` members within the initial delay and (optionally) sync them to Stable."""
    ids: list[str] = []
    sinks: list[str] = []
    for index in range(count):
        if instances:
            sink, response = h.join(group=group, instance=f"i{index}")
            assert response is None
            member_id = _parked_member_id(h, group, f"i{index}")
        else:
            member_id, sink = h.new_member(group)
        ids.append(member_id)
        sinks.append(sink)
    while any(sink not in h.answers for sink in sinks):
        h.advance(1_000)
    responses = [h.answers[sink] for sink in sinks]
    assert all(r.error_code is ErrorCode.none for r in responses)
    if sync:
        generation = responses[0].generation_id
        leader = responses[0].leader
        assignments = tuple((member_id, f"assignment-{member_id}".encode()) for member_id in ids)
        for member_id in ids:
            if member_id != leader:
                h.sync(member_id, generation, group=group)
        h.sync(leader, generation, group=group, assignments=assignments)
        assert h.state(group) == "Stable"
    return ids


def _parked_member_id(h: Harness, group: str, instance: str) -> str:
    (described,) = h.manager.describe_groups([group], api_version=5)
    return next(m.member_id for m in described.members if m.group_instance_id == instance)
