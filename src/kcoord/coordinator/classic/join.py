"""JoinGroup (API 11) against a classic group: Kafka's ``classicGroupJoinToClassicGroup``.

Versions: v0 has no rebalance timeout (the edge passes the session timeout); v4+ make a new
dynamic member fetch its id first (MEMBER_ID_REQUIRED); v5 adds group.instance.id (static
members, KIP-345); v8 adds the client's reason; v9 adds ``skip_assignment`` for a static leader
that rejoined without changing anything.

Order of checks:

1. empty group id ⇒ INVALID_GROUP_ID; session timeout outside [min, max] ⇒ INVALID_SESSION_TIMEOUT;
   a group id, or another id or name, too long for the group's records ⇒ INVALID_GROUP_ID or
   INVALID_REQUEST (refused here: once the group had changed, the append could not be written);
2. a member id but no group ⇒ UNKNOWN_MEMBER_ID (only an empty member id creates a group);
3. group full ⇒ GROUP_MAX_SIZE_REACHED (PreparingRebalance counts parked joiners);
4. unknown (empty) member id ⇒ :meth:`JoinHandler.join_new_member`;
5. known member id ⇒ :meth:`JoinHandler.join_existing_member`.

A brand-new group whose first join appends nothing writes an empty GroupMetadata record, so
the group exists in the log (Kafka does the same).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kcoord.coordinator.classic import timer_keys
from kcoord.coordinator.classic.group import ClassicGroup, ClassicGroupMember, Waiter
from kcoord.coordinator.classic.messages import JoinGroupRequest, JoinGroupResponse, SyncGroupResponse
from kcoord.coordinator.classic.rebalance import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Rebalancer,
    Step,
)
from kcoord.coordinator.record_codec import fits_record_string
from kcoord.coordinator.records import CoordinatorRecord, GroupMetadataKey, GroupMetadataValue
from kcoord.protocol.errors import ErrorCode, KafkaError

MEMBER_ID_REQUIRED_SINCE = 4
SKIP_ASSIGNMENT_SINCE = 9


_UUID_SUFFIX_BYTES = 37
"""``-`` and a UUID: what a new member's id adds to its instance or client id."""


def _ids_fit_records(request: JoinGroupRequest) -> bool:
    """Every id and name this join may write into the group's metadata record fits its int16 length."""
    prefix = request.group_instance_id if request.group_instance_id is not None else request.client_id
    return (
        fits_record_string(request.member_id)
        and fits_record_string(prefix, _UUID_SUFFIX_BYTES)
        and fits_record_string(request.client_host)
        and fits_record_string(request.protocol_type)
        and all(fits_record_string(name) for name, _ in request.protocols)
    )


def _reason(request: JoinGroupRequest) -> str:
    return request.reason if request.reason else "not provided"


class JoinHandler:
    def __init__(
        self,
        groups: dict[str, ClassicGroup],
        rebalancer: Rebalancer,
        new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.groups = groups
        self.rebalancer = rebalancer
        self.config = rebalancer.config
        self.new_uuid = new_uuid

    def handle(self, request: JoinGroupRequest, sink: Any, step: Step) -> None:
        if not request.group_id or not fits_record_string(request.group_id):
            step.out.respond(sink, JoinGroupResponse(ErrorCode.invalid_group_id, member_id=request.member_id))
            return
        if not _ids_fit_records(request):
            step.out.respond(sink, JoinGroupResponse(ErrorCode.invalid_request, member_id=request.member_id))
            return
        if not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            step.out.respond(
                sink, JoinGroupResponse(ErrorCode.invalid_session_timeout, member_id=request.member_id)
            )
            return
        unknown_member = request.member_id == ""
        group = self.groups.get(request.group_id)
        new_group = group is None
        if group is None:
            if not unknown_member:
                step.out.respond(
                    sink, JoinGroupResponse(ErrorCode.unknown_member_id, member_id=request.member_id)
                )
                return
            group = ClassicGroup(request.group_id, state_timestamp_ms=step.now_ms)
            self.groups[request.group_id] = group

        if not self._accepts_joining_member(group, request.member_id):
            member = group.members.get(request.member_id)
            if member is not None:
                self.rebalancer.remove_member(group, member, step)
            else:
                group.remove(request.member_id)
            step.out.respond(sink, JoinGroupResponse(ErrorCode.group_max_size_reached, member_id=""))
        elif unknown_member:
            self.join_new_member(group, request, sink, step)
        else:
            self.join_existing_member(group, request, sink, step)

        if request.reason and group.current_rebalance is not None:
            group.current_rebalance.client_reasons.append(request.reason)
        if new_group and not step.out.records:
            step.out.records.append(
                CoordinatorRecord(
                    GroupMetadataKey(group.group_id),
                    GroupMetadataValue(
                        protocol_type=group.protocol_type or "",
                        generation=0,
                        protocol=None,
                        leader=None,
                        current_state_timestamp=(
                            -1 if group.state_timestamp_ms is None else group.state_timestamp_ms
                        ),
                        members=(),
                    ),
                )
            )

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.is_in(EMPTY, DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_in(PREPARING):
            # Parked joiners, not members: the size may already exceed a lowered maximum.
            return (member is not None and member.is_awaiting_join) or (
                group.awaiting_join_count < self.config.max_size
            )
        return member is not None or len(group.members) < self.config.max_size

    # -- unknown member ----------------------------------------------------------------------

    def join_new_member(self, group: ClassicGroup, request: JoinGroupRequest, sink: Any, step: Step) -> None:
        if group.is_in(DEAD):
            step.out.respond(sink, JoinGroupResponse(ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            step.out.respond(sink, JoinGroupResponse(ErrorCode.inconsistent_group_protocol))
            return
        prefix = request.group_instance_id if request.group_instance_id is not None else request.client_id
        new_member_id = f"{prefix}-{self.new_uuid()}"
        if request.group_instance_id is not None:
            holder = group.static_members.get(request.group_instance_id)
            if holder is not None:
                self.replace_static_member(group, request, holder, new_member_id, sink, step)
            else:
                self.add_member(group, request, new_member_id, sink, step)
        elif request.api_version >= MEMBER_ID_REQUIRED_SINCE:
            # The id is held as pending until the request's session timeout passes.
            group.pending_join_members.add(new_member_id)
            self.rebalancer.timer.schedule(
                timer_keys.session_key(group.group_id, new_member_id),
                step.now_ms + request.session_timeout_ms,
            )
            step.out.respond(sink, JoinGroupResponse(ErrorCode.member_id_required, member_id=new_member_id))
        else:
            self.add_member(group, request, new_member_id, sink, step)

    # -- known member ------------------------------------------------------------------------

    def join_existing_member(
        self, group: ClassicGroup, request: JoinGroupRequest, sink: Any, step: Step
    ) -> None:
        member_id = request.member_id
        if group.is_in(DEAD):
            step.out.respond(
                sink, JoinGroupResponse(ErrorCode.coordinator_not_available, member_id=member_id)
            )
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            step.out.respond(
                sink, JoinGroupResponse(ErrorCode.inconsistent_group_protocol, member_id=member_id)
            )
            return
        if member_id in group.pending_join_members:
            if request.group_instance_id is not None:
                # A pending id is only ever handed to a dynamic member.
                step.out.respond(sink, JoinGroupResponse(ErrorCode.unknown_server_error, member_id=member_id))
                return
            self.add_member(group, request, member_id, sink, step)
            return
        try:
            group.validate_member(member_id, request.group_instance_id)
        except KafkaError as error:
            step.out.respond(sink, JoinGroupResponse(error.code, member_id=member_id))
            return

        member = group.members[member_id]
        if group.is_in(PREPARING):
            self.update_member(
                group, member, request, sink, "member_joined", "joining during rebalance", step
            )
        elif group.is_in(COMPLETING) and member.protocols == request.protocols:
            # It probably missed the JoinGroup response: resend the current generation.
            step.out.respond(sink, group.join_response(member_id))
        elif group.is_in(COMPLETING):
            self.update_member(group, member, request, sink, "metadata_changed", "metadata changed", step)
        elif group.is_in(STABLE) and group.is_leader(member_id):
            # The leader may rejoin to reassign for reasons the coordinator cannot see (topic changes).
            self.update_member(group, member, request, sink, "leader_rejoined", "leader rejoined", step)
        elif group.is_in(STABLE) and member.protocols != request.protocols:
            self.update_member(group, member, request, sink, "metadata_changed", "metadata changed", step)
        elif group.is_in(STABLE):
            step.out.respond(sink, group.join_response(member_id, with_members=False))
        else:
            step.out.respond(sink, JoinGroupResponse(ErrorCode.unknown_member_id, member_id=member_id))

    # -- membership changes ------------------------------------------------------------------

    def add_member(
        self, group: ClassicGroup, request: JoinGroupRequest, member_id: str, sink: Any, step: Step
    ) -> None:
        member = ClassicGroupMember(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            is_new=True,
        )
        if group.is_in(PREPARING) and group.previous_state is EMPTY:
            group.new_member_added = True
            if group.initial_delay is not None:
                group.initial_delay.last_arrival_ms = step.now_ms
        group.add(member, Waiter(sink))
        # A new member cannot heartbeat while parked; KAFKA-7610 bounds how long it may wait.
        self.rebalancer.schedule_session(group, member, step, self.config.new_member_join_timeout_ms)
        self.rebalancer.maybe_prepare_rebalance_or_complete_join(
            group, "member_joined", f"adding new member {member_id}; client reason: {_reason(request)}", step
        )

    def update_member(
        self,
        group: ClassicGroup,
        member: ClassicGroupMember,
        request: JoinGroupRequest,
        sink: Any,
        trigger: str,
        why: str,
        step: Step,
    ) -> None:
        superseded = group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, Waiter(sink)
        )
        if superseded is not None:
            step.out.respond(
                superseded.sink,
                JoinGroupResponse(ErrorCode.rebalance_in_progress, member_id=member.member_id),
            )
        self.rebalancer.maybe_prepare_rebalance_or_complete_join(
            group, trigger, f"{why} ({member.member_id}); client reason: {_reason(request)}", step
        )

    def replace_static_member(
        self,
        group: ClassicGroup,
        request: JoinGroupRequest,
        old_member_id: str,
        new_member_id: str,
        sink: Any,
        step: Step,
    ) -> None:
        """A static member rejoined with an empty id: it takes a new id and the old one is fenced."""
        rebalancer = self.rebalancer
        instance_id = request.group_instance_id
        assert instance_id is not None
        previous_leader = group.leader_id
        old = group.members[old_member_id]
        rebalancer.answer_join(
            group, old, JoinGroupResponse(ErrorCode.fenced_instance_id, member_id=old_member_id), step
        )
        rebalancer.answer_sync(old, SyncGroupResponse(ErrorCode.fenced_instance_id), step)
        rebalancer.cancel_session(group, old_member_id)
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        rebalancer.schedule_session(group, member, step)
        group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, Waiter(sink)
        )
        reason = f"static member {instance_id} rejoined as {new_member_id}; client reason: {_reason(request)}"

        if group.is_in(STABLE):
            if group.protocol_name == group.select_protocol():
                # Nothing changes for the assignment: persist the new id, no rebalance.
                rebalancer.write_group(group, group.group_assignment(), step)
                waiter = group.take_join_waiter(member)
                assert waiter is not None
                is_leader = group.is_leader(new_member_id)
                skip = request.api_version >= SKIP_ASSIGNMENT_SINCE
                step.out.respond(
                    waiter.sink,
                    JoinGroupResponse(
                        ErrorCode.none,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=(group.leader_id or "") if skip else (previous_leader or ""),
                        skip_assignment=skip and is_leader,
                        member_id=new_member_id,
                        members=group.join_members() if skip and is_leader else (),
                    ),
                )
            else:
                rebalancer.maybe_prepare_rebalance_or_complete_join(group, "metadata_changed", reason, step)
        elif group.is_in(COMPLETING):
            # The leader may already hold the old id in its assignment (KAFKA-9801): start over.
            rebalancer.prepare_rebalance(group, "static_member_replaced", reason, step)
        else:
            rebalancer.maybe_complete_join_phase(group, step)
