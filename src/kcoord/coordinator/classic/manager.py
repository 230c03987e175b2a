"""All classic groups of one offsets-log partition (a shard): the pure state machine's front door.

Every handler takes the request, an opaque *sink* standing for the waiting client, and the
time, and returns a :class:`CoordinatorResult`. Responses in a result are released by the
shell only after the result's records are appended. A parked JoinGroup or SyncGroup keeps its
sink inside the member and is answered in the result of whichever later event completes it:
another member's request or a timer (:meth:`ClassicGroupManager.on_timer`).

Live handlers change the in-memory groups as they go (Kafka's classic groups do the same and
do not replay their own records). :meth:`ClassicGroupManager.replay` is for loading a
partition: it rebuilds a group from each GroupMetadata record (a tombstone removes it). The
shell must not replay the GroupMetadata records of a live result into the same manager.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable
from typing import Any

from kcoord.coordinator.classic import admin, liveness, timer_keys
from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.group import ClassicGroup, ClassicGroupMember
from kcoord.coordinator.classic.history import ClassicGroupObserver, NullObserver, RebalanceRecord
from kcoord.coordinator.classic.join import JoinHandler
from kcoord.coordinator.classic.members import MemberRequests
from kcoord.coordinator.classic.messages import (
    DescribedGroup,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    ListedGroup,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kcoord.coordinator.classic.rebalance import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, Rebalancer, Step
from kcoord.coordinator.classic.state import ClassicGroupState
from kcoord.coordinator.records import CoordinatorRecord, GroupMetadataKey, GroupMetadataValue
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.timer.api import Timer


class ClassicGroupManager:
    """Owns the classic groups of one offsets-log partition; not thread-safe (one runner per shard)."""

    def __init__(
        self,
        timer: Timer,
        config: ClassicGroupConfig | None = None,
        observer: ClassicGroupObserver | None = None,
        new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.timer = timer
        self.config = config or ClassicGroupConfig()
        self._groups: dict[str, ClassicGroup] = {}
        self._rebalancer = Rebalancer(timer, self.config, observer or NullObserver())
        self._join = JoinHandler(self._groups, self._rebalancer, new_uuid)
        self._members = MemberRequests(self._groups, self._rebalancer)
        self._last_now_ms = 0

    def _step(self, now_ms: int) -> Step:
        self._last_now_ms = max(self._last_now_ms, now_ms)
        return Step(now_ms, CoordinatorResult())

    # -- group requests ----------------------------------------------------------------------

    def join_group(self, request: JoinGroupRequest, sink: Any, now_ms: int) -> CoordinatorResult:
        step = self._step(now_ms)
        self._join.handle(request, sink, step)
        return step.out

    def sync_group(self, request: SyncGroupRequest, sink: Any, now_ms: int) -> CoordinatorResult:
        step = self._step(now_ms)
        self._members.sync(request, sink, step)
        return step.out

    def heartbeat_code(
        self, request: HeartbeatRequest, now_ms: int, connection_id: int | None = None
    ) -> ErrorCode:
        """A heartbeat's answer, without a result: a heartbeat never parks a request and never
        writes, so the hot path of a stable group needs no sink, response object or result."""
        if now_ms > self._last_now_ms:
            self._last_now_ms = now_ms
        return self._members.heartbeat_code(request, now_ms, connection_id)

    def leave_group(self, request: LeaveGroupRequest, sink: Any, now_ms: int) -> CoordinatorResult:
        step = self._step(now_ms)
        self._members.leave(request, sink, step)
        return step.out

    def on_timer(self, key: str, now_ms: int) -> CoordinatorResult:
        """Handle a fired key of ours (``classic:...``); keys we do not own are ignored."""
        step = self._step(now_ms)
        target = timer_keys.parse_key(key)
        if target is None:
            return step.out
        deadline = self.timer.deadline(key)
        if deadline is not None and deadline > now_ms:
            return step.out
        group = self._groups.get(target.group_id)
        if group is None:
            return step.out
        if target.kind == timer_keys.JOIN:
            self._rebalancer.on_join_deadline(group, step)
        elif target.kind == timer_keys.SYNC:
            self._rebalancer.on_sync_deadline(group, step)
        elif target.member_id is not None:
            self._rebalancer.on_session_deadline(group, target.member_id, step)
        return step.out

    # -- liveness hints and topic changes (kcoord additions) -----------------------------------

    def note_member_connection(
        self, group_id: str, member_id: str, connection_id: int, now_ms: int, *, heartbeat: bool
    ) -> bool:
        """A request of this member arrived on ``connection_id``; True if the member is known."""
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return False
        liveness.observe_activity(member, connection_id, now_ms, heartbeat=heartbeat)
        return True

    def member_disconnected(
        self, group_id: str, member_id: str, connection_id: int, now_ms: int
    ) -> CoordinatorResult:
        """The connection that carried the member closed without a LeaveGroup: shorten its session."""
        step = self._step(now_ms)
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or group.is_in(DEAD):
            return step.out
        if not liveness.should_shorten(member, connection_id, self.config):
            return step.out
        deadline = now_ms + liveness.disconnect_grace_ms(member, self.config)
        key = timer_keys.session_key(group_id, member_id)
        current = self.timer.deadline(key)
        member.disconnected_ms = now_ms
        if current is None or deadline < current:
            self.timer.schedule(key, deadline)
        return step.out

    def on_partitions_added(self, topic: str, now_ms: int) -> CoordinatorResult:
        """A topic grew: rebalance every consumer group subscribed to it now, rather than waiting
        for a client's metadata refresh (metadata.max.age.ms, five minutes by default)."""
        step = self._step(now_ms)
        for group in list(self._groups.values()):
            if group.is_in(STABLE, COMPLETING) and group.is_subscribed_to_topic(topic):
                self._rebalancer.prepare_rebalance(
                    group, "partitions_added", f"partitions added to topic {topic}", step
                )
        return step.out

    # -- admin -------------------------------------------------------------------------------

    def describe_groups(self, group_ids: Iterable[str], api_version: int) -> list[DescribedGroup]:
        return [admin.describe(group_id, self._groups.get(group_id), api_version) for group_id in group_ids]

    def list_groups(self, states_filter: Collection[str] | None = None) -> list[ListedGroup]:
        return admin.list_groups(list(self._groups.values()), states_filter)

    def validate_delete_group(self, group_id: str) -> None:
        """Raises GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP as :class:`KafkaError`."""
        admin.validate_delete(self._groups.get(group_id))

    def delete_group(self, group_id: str) -> list[CoordinatorRecord]:
        """Remove a validated group now; returns its tombstone (append after its offsets' tombstones)."""
        group = self._groups.pop(group_id, None)
        if group is not None:
            self._rebalancer.cancel_group_timers(group)
        return [CoordinatorRecord(GroupMetadataKey(group_id), None)]

    def maybe_delete_empty_group(self, group_id: str) -> list[CoordinatorRecord]:
        """Called when a group's last offset expired: an Empty group is deleted (tombstone)."""
        group = self._groups.get(group_id)
        if group is None or not group.is_in(EMPTY):
            return []
        return self.delete_group(group_id)

    # -- online migration (see kcoord.coordinator.migration) ---------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        return self._groups.get(group_id)

    def release_for_upgrade(self, group_id: str, now_ms: int) -> CoordinatorResult:
        """Hand a live group over for its conversion to a consumer group: its parked JoinGroup and
        SyncGroup requests learn to rejoin (REBALANCE_IN_PROGRESS), its timers stop, and the
        result holds its tombstone."""
        step = self._step(now_ms)
        group = self._groups.pop(group_id)
        for member in group.members.values():
            rejoin = JoinGroupResponse(ErrorCode.rebalance_in_progress, member_id=member.member_id)
            self._rebalancer.answer_join(group, member, rejoin, step)
            self._rebalancer.answer_sync(member, SyncGroupResponse(ErrorCode.rebalance_in_progress), step)
        self._rebalancer.finish_rebalance(group, "upgraded", step)
        self._rebalancer.cancel_group_timers(group)
        step.out.records.append(CoordinatorRecord(GroupMetadataKey(group_id), None))
        return step.out

    def adopt_downgraded(self, group: ClassicGroup, now_ms: int) -> CoordinatorResult:
        """A Stable group converted from a consumer group: write it, arm its members' sessions and
        rebalance at once, so that the members agree on an assignment of their own."""
        step = self._step(now_ms)
        self._groups[group.group_id] = group
        self._rebalancer.write_group(group, group.group_assignment(), step)
        for member in group.members.values():
            self._rebalancer.schedule_session(group, member, step)
        self._rebalancer.prepare_rebalance(
            group, "downgrade", "the last consumer-protocol member left the consumer group", step
        )
        return step.out

    # -- what the offsets manager needs ------------------------------------------------------

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        api_version: int,
        now_ms: int,
        is_transactional: bool = False,
    ) -> None:
        """Raise :class:`KafkaError` unless the commit is allowed; a valid member commit keeps its session.

        Runs on every commit, so it moves the clock itself rather than through a :class:`Step` (it
        appends and answers nothing)."""
        if now_ms > self._last_now_ms:
            self._last_now_ms = now_ms
        group = self._groups.get(group_id)
        if group is None:
            if generation_id < 0:
                self.ensure_simple_group(group_id, now_ms)
                return
            if api_version >= admin.GROUP_ID_NOT_FOUND_IN_COMMIT_SINCE:
                raise KafkaError(ErrorCode.group_id_not_found)
            raise KafkaError(ErrorCode.illegal_generation)
        admin.validate_existing_group_commit(
            group, member_id, group_instance_id, generation_id, is_transactional
        )
        if is_transactional:
            return  # a transactional commit does not keep the member's session (Kafka's rule)
        member = group.members.get(member_id)
        if member is not None and group.is_in(STABLE, PREPARING):
            self._rebalancer.schedule_session_at(group, member, now_ms)

    def ensure_simple_group(self, group_id: str, now_ms: int) -> None:
        """Create an Empty group without protocol type (offsets only) if none exists; also for replay."""
        if group_id not in self._groups:
            self._groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)

    def group_state(self, group_id: str) -> ClassicGroupState | None:
        group = self._groups.get(group_id)
        return None if group is None else group.state

    def has_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        """Whether the group uses ``topic``; a ``consumer`` group whose subscriptions cannot be read
        counts as subscribed to everything (Kafka's ``isSubscribedToTopic``)."""
        group = self._groups.get(group_id)
        return group is not None and group.is_subscribed_to_topic(topic)

    def validate_offset_delete(self, group_id: str) -> None:
        admin.validate_offset_delete(self._groups.get(group_id))

    def protocol_type(self, group_id: str) -> str | None:
        """The group's protocol type; None for a simple (offsets-only) or missing group."""
        group = self._groups.get(group_id)
        return None if group is None else group.protocol_type

    def is_simple_or_missing(self, group_id: str) -> bool:
        return self.protocol_type(group_id) is None

    def empty_since_ms(self, group_id: str) -> int | None:
        """When the group became Empty; None when it is not Empty or the time is unknown."""
        group = self._groups.get(group_id)
        if group is None or not group.is_in(EMPTY):
            return None
        return group.state_timestamp_ms

    def restore_history(self, past_rebalances: Callable[[str], list[RebalanceRecord]]) -> None:
        """Give each group without a history the rebalances ``past_rebalances`` kept of it (a
        restart loses the in-memory history; the shell keeps a copy, see runtime.rebalance_journal)."""
        for group_id, group in self._groups.items():
            if not group.history:
                group.history.extend(past_rebalances(group_id))

    def rebalance_history(self, group_id: str) -> list[RebalanceRecord]:
        """The group's recent rebalances, oldest first (at most 32)."""
        group = self._groups.get(group_id)
        return [] if group is None else list(group.history)

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def generation_id(self, group_id: str) -> int | None:
        """The group's current generation (for the observability endpoints); None when unknown."""
        group = self._groups.get(group_id)
        return None if group is None else group.generation_id

    # -- loading and unloading ---------------------------------------------------------------

    def replay(self, record: CoordinatorRecord) -> None:
        """Rebuild a group from a GroupMetadata record (Stable with members, else Empty).

        Only for loading a partition. Records of other types are ignored. No timer is armed
        here: :meth:`on_loaded` arms every member's session once the whole partition is read.
        """
        if not isinstance(record.key, GroupMetadataKey):
            return
        group_id = record.key.group
        previous = self._groups.pop(group_id, None)
        if previous is not None:
            self._rebalancer.cancel_group_timers(previous)
        value = record.value
        if not isinstance(value, GroupMetadataValue):
            return
        group = ClassicGroup(
            group_id,
            state=STABLE if value.members else EMPTY,
            state_timestamp_ms=None if value.current_state_timestamp == -1 else value.current_state_timestamp,
            generation_id=value.generation,
            protocol_name=value.protocol,
            leader_id=value.leader,
        )
        for loaded in value.members:
            group.add(
                ClassicGroupMember(
                    member_id=loaded.member_id,
                    group_instance_id=loaded.group_instance_id,
                    client_id=loaded.client_id,
                    client_host=loaded.client_host,
                    rebalance_timeout_ms=(
                        loaded.session_timeout if loaded.rebalance_timeout == -1 else loaded.rebalance_timeout
                    ),
                    session_timeout_ms=loaded.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=((value.protocol or "", loaded.subscription),),
                    assignment=loaded.assignment,
                ),
                None,
            )
        group.protocol_type = value.protocol_type or None
        group.leader_id = value.leader
        group.subscribed_topics = group.compute_subscribed_topics()
        self._groups[group_id] = group

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        """The partition is loaded: arm every member's session at now plus its session timeout, and
        rebalance groups over the size cap (in case group.max.size was lowered)."""
        step = self._step(now_ms)
        for group in self._groups.values():
            for member in group.members.values():
                self._rebalancer.schedule_session(group, member, step)
            if len(group.members) > self.config.max_size and group.can_rebalance():
                self._rebalancer.prepare_rebalance(
                    group, "over_capacity", f"loaded with {len(group.members)} members", step
                )
        return step.out

    def unload(self, now_ms: int | None = None) -> CoordinatorResult:
        """The partition moves away: every group goes Dead and parked requests get NOT_COORDINATOR."""
        step = self._step(self._last_now_ms if now_ms is None else now_ms)
        for group in self._groups.values():
            self._rebalancer.unload(group, step)
        return step.out
