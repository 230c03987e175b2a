"""SyncGroup (14), Heartbeat (12) and LeaveGroup (13) against a classic group.

SyncGroup: v3 adds group.instance.id, v5 the protocol type and name (checked when given).
Checks in order: group missing or Empty ⇒ UNKNOWN_MEMBER_ID; Dead ⇒ COORDINATOR_NOT_AVAILABLE;
member validation (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID); generation ⇒ ILLEGAL_GENERATION;
protocol ⇒ INCONSISTENT_GROUP_PROTOCOL. Then PreparingRebalance ⇒ REBALANCE_IN_PROGRESS,
CompletingRebalance ⇒ park (the leader's request completes everyone), Stable ⇒ the stored
assignment.

Heartbeat: group missing ⇒ UNKNOWN_MEMBER_ID; Dead ⇒ COORDINATOR_NOT_AVAILABLE; member
validation; generation; then Empty ⇒ UNKNOWN_MEMBER_ID, PreparingRebalance ⇒
REBALANCE_IN_PROGRESS, otherwise NONE. A valid heartbeat moves the session deadline.

LeaveGroup: v3+ carry a batch of members (v0-2's single member is mapped by the edge); v5 adds
a reason per member. Group missing ⇒ top-level UNKNOWN_MEMBER_ID; Dead ⇒ top-level
COORDINATOR_NOT_AVAILABLE; an empty member id with a known instance id removes that static
member (admin path); a pending id is simply dropped.
"""

from __future__ import annotations

from typing import Any

from kcoord.coordinator.classic import liveness
from kcoord.coordinator.classic.group import ClassicGroup, Waiter
from kcoord.coordinator.classic.messages import (
    HeartbeatRequest,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kcoord.coordinator.classic.rebalance import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Rebalancer,
    Step,
)
from kcoord.protocol.errors import ErrorCode, KafkaError


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _member_error(group: ClassicGroup, request: SyncGroupRequest | HeartbeatRequest) -> ErrorCode | None:
    """The checks SyncGroup and Heartbeat share, in order: Dead ⇒ COORDINATOR_NOT_AVAILABLE, member
    validation (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID), then the generation ⇒ ILLEGAL_GENERATION."""
    if group.is_in(DEAD):
        return ErrorCode.coordinator_not_available
    try:
        group.validate_member(request.member_id, request.group_instance_id)
    except KafkaError as error:
        return error.code
    if request.generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    return None


class MemberRequests:
    def __init__(self, groups: dict[str, ClassicGroup], rebalancer: Rebalancer) -> None:
        self.groups = groups
        self.rebalancer = rebalancer

    # -- SyncGroup ---------------------------------------------------------------------------

    def sync(self, request: SyncGroupRequest, sink: Any, step: Step) -> None:
        group = self.groups.get(request.group_id)
        error = self._sync_error(group, request)
        if error is not None or group is None:
            step.out.respond(sink, SyncGroupResponse(error or ErrorCode.unknown_member_id))
            return
        if group.is_in(PREPARING):
            step.out.respond(sink, SyncGroupResponse(ErrorCode.rebalance_in_progress))
            return
        member = group.members[request.member_id]
        if group.is_in(COMPLETING):
            if member.sync_waiter is not None:
                # Kafka drops the older parked request; answer it so its connection is not stuck.
                self.rebalancer.answer_sync(member, SyncGroupResponse(ErrorCode.rebalance_in_progress), step)
            member.sync_waiter = Waiter(sink)
            self.rebalancer.remove_pending_sync_member(group, member.member_id)
            if group.is_leader(member.member_id):
                self.rebalancer.complete_sync(group, dict(request.assignments), step)
            return
        self.rebalancer.remove_pending_sync_member(group, member.member_id)
        step.out.respond(sink, group.sync_response(member))

    @staticmethod
    def _sync_error(group: ClassicGroup | None, request: SyncGroupRequest) -> ErrorCode | None:
        if not request.group_id:
            return ErrorCode.invalid_group_id
        if group is None or group.is_in(EMPTY):
            return ErrorCode.unknown_member_id
        member_error = _member_error(group, request)
        if member_error is not None:
            return member_error
        if _inconsistent(request.protocol_type, group.protocol_type) or _inconsistent(
            request.protocol_name, group.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol
        return None

    # -- Heartbeat ---------------------------------------------------------------------------

    def heartbeat_code(
        self, request: HeartbeatRequest, now_ms: int, connection_id: int | None = None
    ) -> ErrorCode:
        """A heartbeat's whole effect: move the session deadline and say how the group stands.

        ``connection_id`` (when the shell knows it) feeds the fast-failover liveness hints.
        """
        if not request.group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(request.group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        member_error = _member_error(group, request)
        if member_error is not None:
            return member_error
        if group.is_in(EMPTY):
            return ErrorCode.unknown_member_id
        member = group.members[request.member_id]
        if connection_id is not None:
            liveness.observe_activity(member, connection_id, now_ms, heartbeat=True)
        self.rebalancer.schedule_session_at(group, member, now_ms)
        if group.is_in(PREPARING):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # -- LeaveGroup --------------------------------------------------------------------------

    def leave(self, request: LeaveGroupRequest, sink: Any, step: Step) -> None:
        if not request.group_id:
            step.out.respond(sink, LeaveGroupResponse(ErrorCode.invalid_group_id))
            return
        group = self.groups.get(request.group_id)
        if group is None:
            step.out.respond(sink, LeaveGroupResponse(ErrorCode.unknown_member_id))
            return
        if group.is_in(DEAD):
            step.out.respond(sink, LeaveGroupResponse(ErrorCode.coordinator_not_available))
            return

        results: list[LeftMember] = []
        left: list[str] = []
        reasons: list[str] = []
        for leaving in request.members:
            code = self._leave_one(group, leaving.member_id, leaving.group_instance_id, step)
            results.append(LeftMember(leaving.member_id, leaving.group_instance_id, code))
            if code is ErrorCode.none:
                left.append(leaving.member_id or str(leaving.group_instance_id))
                self.rebalancer.events.on_member_removed(
                    group.group_id,
                    leaving.member_id or str(leaving.group_instance_id),
                    "left",
                    leaving.reason or "not provided",
                    step.now_ms,
                )
                reasons.append(
                    f"{leaving.member_id or leaving.group_instance_id}: {leaving.reason or 'not provided'}"
                )

        if left:
            if group.is_in(STABLE, COMPLETING):
                self.rebalancer.maybe_prepare_rebalance_or_complete_join(
                    group, "member_left", f"explicit LeaveGroup for {left}", step
                )
            elif group.is_in(PREPARING):
                self.rebalancer.maybe_complete_join_phase(group, step)
            record = group.current_rebalance
            if record is not None:
                record.client_reasons.extend(reasons)
        step.out.respond(sink, LeaveGroupResponse(ErrorCode.none, tuple(results)))

    def _leave_one(
        self, group: ClassicGroup, member_id: str, group_instance_id: str | None, step: Step
    ) -> ErrorCode:
        if member_id == "":
            # Administrative removal of a static member by its instance id.
            holder = group.static_members.get(group_instance_id) if group_instance_id is not None else None
            if holder is None:
                return ErrorCode.unknown_member_id
            self.rebalancer.remove_member(group, group.members[holder], step)
            return ErrorCode.none
        if member_id in group.pending_join_members:
            group.remove(member_id)
            self.rebalancer.cancel_session(group, member_id)
            return ErrorCode.none
        try:
            group.validate_member(member_id, group_instance_id)
        except KafkaError as error:
            return error.code
        self.rebalancer.remove_member(group, group.members[member_id], step)
        return ErrorCode.none
