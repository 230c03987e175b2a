"""The rebalance mechanics shared by every classic request and timer.

This is Kafka's ``prepareRebalance`` / ``completeClassicGroupJoin`` / heartbeat-expiry /
pending-sync machinery, expressed over a :class:`Step`: the time of the event being handled
and the :class:`CoordinatorResult` that collects the records to append and the parked requests
that the event answers. Nothing here looks a group up by id; the manager does that.

Order of a join completion (``complete_join``):

1. drop dynamic members that did not rejoin;
2. keep the leader, or elect a member that rejoined; if nobody rejoined, wait another
   rebalance timeout;
3. start the next generation: Empty (write the group record) or CompletingRebalance (answer
   every parked JoinGroup, re-arm sessions);
4. arm the pending-sync deadline (KAFKA-12890).
"""

from __future__ import annotations

from dataclasses import dataclass

from kcoord.coordinator.classic import timer_keys
from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.group import ClassicGroup, ClassicGroupMember, InitialDelay
from kcoord.coordinator.classic.history import ClassicGroupObserver, RebalanceRecord, rebalance_events
from kcoord.coordinator.classic.messages import JoinGroupResponse, SyncGroupResponse
from kcoord.coordinator.classic.state import ClassicGroupState
from kcoord.coordinator.records import CoordinatorRecord, GroupMetadataKey
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import ErrorCode
from kcoord.timer.api import Timer

EMPTY = ClassicGroupState.EMPTY
PREPARING = ClassicGroupState.PREPARING_REBALANCE
COMPLETING = ClassicGroupState.COMPLETING_REBALANCE
STABLE = ClassicGroupState.STABLE
DEAD = ClassicGroupState.DEAD


@dataclass(slots=True)
class Step:
    """One event being handled: its time and what it will append and answer."""

    now_ms: int
    out: CoordinatorResult


class Rebalancer:
    def __init__(self, timer: Timer, config: ClassicGroupConfig, observer: ClassicGroupObserver) -> None:
        self.timer = timer
        self.config = config
        self.observer = observer
        self.events = rebalance_events(observer)

    # -- small helpers -----------------------------------------------------------------------

    def transition(self, group: ClassicGroup, target: ClassicGroupState, step: Step) -> None:
        old = group.transition_to(target, step.now_ms)
        self.observer.on_state_change(group.group_id, old, target, step.now_ms)

    def schedule_session(
        self, group: ClassicGroup, member: ClassicGroupMember, step: Step, timeout_ms: int | None = None
    ) -> None:
        """Set or move the member's session deadline (never cancel-and-recreate)."""
        self.schedule_session_at(group, member, step.now_ms, timeout_ms)

    def schedule_session_at(
        self, group: ClassicGroup, member: ClassicGroupMember, now_ms: int, timeout_ms: int | None = None
    ) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        key = member.session_timer_key
        if not key:
            key = member.session_timer_key = timer_keys.session_key(group.group_id, member.member_id)
        self.timer.schedule(key, now_ms + timeout)

    def cancel_session(self, group: ClassicGroup, member_id: str) -> None:
        self.timer.cancel(timer_keys.session_key(group.group_id, member_id))

    def cancel_group_timers(self, group: ClassicGroup) -> None:
        self.timer.cancel(timer_keys.join_key(group.group_id))
        self.timer.cancel(timer_keys.sync_key(group.group_id))
        for member_id in [*group.members, *group.pending_join_members]:
            self.cancel_session(group, member_id)

    def answer_join(
        self, group: ClassicGroup, member: ClassicGroupMember, response: JoinGroupResponse, step: Step
    ) -> bool:
        waiter = group.take_join_waiter(member)
        if waiter is None:
            return False
        step.out.respond(waiter.sink, response)
        return True

    def answer_sync(self, member: ClassicGroupMember, response: SyncGroupResponse, step: Step) -> bool:
        waiter = member.sync_waiter
        if waiter is None:
            return False
        member.sync_waiter = None
        step.out.respond(waiter.sink, response)
        return True

    def remove_member(self, group: ClassicGroup, member: ClassicGroupMember, step: Step) -> None:
        """Drop a member, answering whatever it has parked with UNKNOWN_MEMBER_ID."""
        self.answer_join(group, member, JoinGroupResponse(ErrorCode.unknown_member_id, member_id=""), step)
        self.answer_sync(member, SyncGroupResponse(ErrorCode.unknown_member_id), step)
        group.remove(member.member_id)
        self.cancel_session(group, member.member_id)

    def write_group(self, group: ClassicGroup, assignment: dict[str, bytes], step: Step) -> None:
        step.out.records.append(
            CoordinatorRecord(GroupMetadataKey(group.group_id), group.metadata_value(assignment))
        )

    def finish_rebalance(self, group: ClassicGroup, outcome: str, step: Step) -> None:
        record = group.current_rebalance
        if record is None:
            return
        record.outcome = outcome
        record.completed_ms = step.now_ms
        self.observer.on_rebalance_finished(group.group_id, record)

    # -- join phase --------------------------------------------------------------------------

    def maybe_prepare_rebalance_or_complete_join(
        self, group: ClassicGroup, trigger: str, reason: str, step: Step
    ) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, trigger, reason, step)
        else:
            self.maybe_complete_join_phase(group, step)

    def prepare_rebalance(self, group: ClassicGroup, trigger: str, reason: str, step: Step) -> None:
        if group.is_in(COMPLETING):
            # Parked syncs of the abandoned generation learn to rejoin.
            for member in group.members.values():
                member.assignment = b""
            self.propagate_assignment(group, ErrorCode.rebalance_in_progress, step)
        self.finish_rebalance(group, "restarted", step)
        group.pending_sync_members.clear()
        self.timer.cancel(timer_keys.sync_key(group.group_id))

        initial = group.is_in(EMPTY)
        group.history.append(
            RebalanceRecord(
                trigger="initial" if initial else trigger,
                reason=reason,
                started_ms=step.now_ms,
                generation_before=group.generation_id,
                members_before=tuple(group.members),
            )
        )
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_delay = InitialDelay(
                delay, step.now_ms + max(group.rebalance_timeout_ms(), delay), step.now_ms
            )
            group.new_member_added = False
            self.timer.schedule(timer_keys.join_key(group.group_id), step.now_ms + delay)
        self.transition(group, PREPARING, step)
        self.events.on_rebalance_started(group.group_id, group.history[-1])
        if not initial:
            self.maybe_complete_join_else_schedule(group, step)

    def maybe_complete_join_phase(self, group: ClassicGroup, step: Step) -> None:
        """Complete the join early once everyone rejoined; never during the initial delay."""
        if not group.is_in(PREPARING) or group.previous_state is EMPTY:
            return
        if group.has_all_members_joined():
            self.complete_join(group, step)

    def maybe_complete_join_else_schedule(self, group: ClassicGroup, step: Step) -> None:
        if group.has_all_members_joined():
            self.complete_join(group, step)
        else:
            group.initial_delay = None
            self.timer.schedule(
                timer_keys.join_key(group.group_id), step.now_ms + group.rebalance_timeout_ms()
            )

    def on_join_deadline(self, group: ClassicGroup, step: Step) -> None:
        if not group.is_in(PREPARING):
            return
        initial = group.initial_delay
        if initial is not None and group.new_member_added:
            # New members arrived during the wait: wait on until one delay passed with none arriving.
            group.new_member_added = False
            quiet_end = min(initial.last_arrival_ms + initial.delay_ms, initial.limit_ms)
            if quiet_end > step.now_ms:
                self.timer.schedule(timer_keys.join_key(group.group_id), quiet_end)
                return
        self.complete_join(group, step)

    def complete_join(self, group: ClassicGroup, step: Step) -> None:
        self.timer.cancel(timer_keys.join_key(group.group_id))
        group.initial_delay = None
        record = group.current_rebalance
        for member in [m for m in group.not_yet_rejoined() if not m.is_static]:
            self.remove_member(group, member, step)
            if record is not None:
                record.removed_not_rejoined.append(member.member_id)
            self.events.on_member_removed(
                group.group_id, member.member_id, "not_rejoined", "did not rejoin in time", step.now_ms
            )
        if group.is_in(DEAD):
            return
        if not group.elect_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            self.timer.schedule(
                timer_keys.join_key(group.group_id), step.now_ms + group.rebalance_timeout_ms()
            )
            return

        group.generation_id += 1
        group.pending_sync_members.clear()
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = group.compute_subscribed_topics()
            self.transition(group, EMPTY, step)
            self.write_group(group, {}, step)
            if record is not None:
                record.join_completed_ms = step.now_ms
                record.generation_after = group.generation_id
                self.events.on_join_completed(group.group_id, record)
            self.finish_rebalance(group, "empty", step)
            return

        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        self.transition(group, COMPLETING, step)
        if record is not None:
            record.join_completed_ms = step.now_ms
            record.generation_after = group.generation_id
            record.members_after = tuple(group.members)
            self.events.on_join_completed(group.group_id, record)
        for member in list(group.members.values()):
            self.answer_join(
                group,
                member,
                group.join_response(member.member_id),
                step,
            )
            self.schedule_session(group, member, step)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.timer.schedule(timer_keys.sync_key(group.group_id), step.now_ms + group.rebalance_timeout_ms())

    # -- sync phase --------------------------------------------------------------------------

    def propagate_assignment(self, group: ClassicGroup, error: ErrorCode, step: Step) -> None:
        """Answer every parked SyncGroup with its assignment (or ``error``) and re-arm its session."""
        for member in group.members.values():
            if self.answer_sync(member, group.sync_response(member, error), step):
                self.schedule_session(group, member, step)

    def complete_sync(self, group: ClassicGroup, assignments: dict[str, bytes], step: Step) -> None:
        """The leader's assignment: write the group, answer every parked sync, become Stable."""
        self.events.on_assignment_received(
            group.group_id, group.leader_id or "", group.generation_id, step.now_ms
        )
        full = {member_id: assignments.get(member_id, b"") for member_id in group.members}
        self.write_group(group, full, step)
        for member_id, member in group.members.items():
            member.assignment = full[member_id]
        self.propagate_assignment(group, ErrorCode.none, step)
        self.transition(group, STABLE, step)
        self.finish_rebalance(group, "stable", step)

    def remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(COMPLETING, STABLE) or not group.pending_sync_members:
            self.timer.cancel(timer_keys.sync_key(group.group_id))

    def on_sync_deadline(self, group: ClassicGroup, step: Step) -> None:
        """Members that never sent SyncGroup are removed and the group rebalances (KAFKA-12890)."""
        if not group.is_in(COMPLETING, STABLE) or not group.pending_sync_members:
            return
        missing = sorted(group.pending_sync_members)
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                self.remove_member(group, member, step)
            else:
                group.remove(member_id)
            self.events.on_member_removed(
                group.group_id, member_id, "not_synced", "no SyncGroup before the deadline", step.now_ms
            )
        if group.history:
            group.history[-1].removed_not_synced.extend(missing)
        self.prepare_rebalance(
            group, "sync_expired", f"removing {missing} on pending sync request expiration", step
        )

    # -- sessions ----------------------------------------------------------------------------

    def on_session_deadline(self, group: ClassicGroup, member_id: str, step: Step) -> None:
        if group.is_in(DEAD):
            return
        if member_id in group.pending_join_members:
            group.remove(member_id)
            if group.is_in(PREPARING) and group.has_all_members_joined():
                self.complete_join(group, step)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        if member.disconnected_ms is not None:
            self.remove_member_and_update(
                group,
                member,
                "member_disconnected",
                "connection closed and no heartbeat within the grace",
                step,
            )
        else:
            self.remove_member_and_update(group, member, "member_expired", "session timeout expired", step)

    def remove_member_and_update(
        self, group: ClassicGroup, member: ClassicGroupMember, trigger: str, reason: str, step: Step
    ) -> None:
        self.remove_member(group, member, step)
        self.events.on_member_removed(
            group.group_id, member.member_id, "session_expired", reason, step.now_ms
        )
        if group.is_in(STABLE, COMPLETING):
            self.maybe_prepare_rebalance_or_complete_join(
                group, trigger, f"{reason}: {member.member_id}", step
            )
        elif group.is_in(PREPARING) and group.has_all_members_joined():
            self.complete_join(group, step)

    # -- unload ------------------------------------------------------------------------------

    def unload(self, group: ClassicGroup, step: Step) -> None:
        """Mark the group Dead and fail whatever it has parked with NOT_COORDINATOR."""
        self.cancel_group_timers(group)
        if group.is_in(DEAD):
            return
        self.finish_rebalance(group, "unloaded", step)
        self.transition(group, DEAD, step)
        for member in group.members.values():
            self.answer_join(
                group, member, JoinGroupResponse(ErrorCode.not_coordinator, member_id=member.member_id), step
            )
            self.answer_sync(member, SyncGroupResponse(ErrorCode.not_coordinator), step)
