"""ConsumerGroupHeartbeat and the timers of every consumer group of one shard.

One heartbeat, in Kafka's order:
1. a leave (epoch -1, or -2 for a static member that will come back) is handled on its own;
2. the group is found, or created by a join (epoch 0);
3. the member is found, created, or takes the place of the static member with its instance id;
   a member whose epoch is neither its current nor (with a subset of its partitions) its previous
   one is fenced;
4. its subscription is updated; a change, a new member or a change in the partition counts of the
   subscribed topics bumps the group epoch;
5. if the group epoch is ahead of the target assignment, the assignor computes a new target;
6. the member reconciles towards its target (:mod:`.reconcile`);
7. its session deadline moves; a member that must revoke partitions gets a rebalance deadline.

Every operation that may change a group returns a :class:`~.change.ConsumerGroupChange`: the
records of the change (:mod:`.persistence`, derived from the group before and after it), its
response, and the groups it leaves due for a downgrade. Loading replays the records.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Collection, Iterable

from kcoord.coordinator.consumer import history, timer_keys
from kcoord.coordinator.consumer.change import ConsumerGroupChange
from kcoord.coordinator.consumer.config import ConsumerGroupConfig, PartitionCount
from kcoord.coordinator.consumer.describe import describe, listed
from kcoord.coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from kcoord.coordinator.consumer.group_configs import GroupConfigOverrides
from kcoord.coordinator.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from kcoord.coordinator.consumer.member_timers import MemberTimers
from kcoord.coordinator.consumer.messages import (
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    DescribedConsumerGroup,
)
from kcoord.coordinator.consumer.persistence import (
    GroupReplayer,
    GroupSnapshot,
    TopicIds,
    changes,
    name_based_topic_ids,
)
from kcoord.coordinator.consumer.reconcile import reconcile
from kcoord.coordinator.consumer.regex_subscriptions import RegexJob, RegexSubscriptions
from kcoord.coordinator.consumer.targets import TargetAssignor
from kcoord.coordinator.consumer.validation import (
    check_epoch,
    same,
    validate_heartbeat,
    validate_offset_commit,
    validate_offset_fetch,
)
from kcoord.coordinator.records import ConsumerGroupRecordKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.timer.api import Timer

CONSUMER_PROTOCOL_TYPE = "consumer"


def new_member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerGroupManager:
    def __init__(
        self,
        timer: Timer,
        config: ConsumerGroupConfig,
        partition_count: PartitionCount,
        member_id_factory: Callable[[], str] = new_member_id,
        topic_ids: TopicIds | None = None,
        topic_names: Callable[[], Iterable[str]] = tuple,
        overrides: GroupConfigOverrides | None = None,
    ) -> None:
        self._timer = timer
        self._config = config
        self._overrides = overrides or GroupConfigOverrides()
        self.partition_count = partition_count
        self._new_member_id = member_id_factory
        self._targets = TargetAssignor(config.assignors)
        self.groups: dict[str, ConsumerGroup] = {}
        self._topic_ids = topic_ids or name_based_topic_ids()
        self._replayer = GroupReplayer(self.groups, self._topic_ids)
        self.timers = MemberTimers(timer, config, self._overrides)
        self.regexes = RegexSubscriptions(topic_names)

    # -- records

    def snapshot(self, group_id: str) -> GroupSnapshot:
        return GroupSnapshot.of(self.groups.get(group_id))

    def record(self, group_id: str, before: GroupSnapshot, change: ConsumerGroupChange) -> None:
        """Add to ``change`` the records of what changed in the group since ``before`` was taken."""
        change.records.extend(changes(group_id, before, self.snapshot(group_id), self._topic_ids))

    def replay(self, key: ConsumerGroupRecordKey, value: object) -> None:
        self._replayer.replay(key, value)

    def on_loaded(self, now_ms: int) -> None:
        """Soft state after a load: regexes resolved, a fresh session (and revocation) deadline each."""
        for group in self.groups.values():
            self.regexes.resolve_group(group, loading=True)
            for member in group.members.values():
                self.timers.schedule_session(group.group_id, member, now_ms)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._timer.schedule(
                        timer_keys.rebalance_key(group.group_id, member.member_id),
                        now_ms + member.rebalance_timeout_ms,
                    )

    @property
    def config(self) -> ConsumerGroupConfig:
        return self._config

    def new_member_id(self) -> str:
        return self._new_member_id()

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    # -- heartbeat

    def heartbeat(
        self, request: ConsumerHeartbeatRequest, sink: object, now_ms: int, connection_id: int | None = None
    ) -> ConsumerGroupChange:
        """The heartbeat's change; a refused one is answered with its :class:`KafkaError` (the
        records of whatever it changed before the refusal are still in the change)."""
        change = ConsumerGroupChange()
        before = self.snapshot(request.group_id)
        try:
            response = self._heartbeat(request, now_ms, change)
        except KafkaError as refused:
            self.record(request.group_id, before, change)
            change.respond(sink, refused)
            return change
        self.record(request.group_id, before, change)
        if connection_id is not None:
            self.note_connection(request.group_id, response.member_id, connection_id)
        change.respond(sink, response)
        return change

    def _heartbeat(
        self, request: ConsumerHeartbeatRequest, now_ms: int, change: ConsumerGroupChange
    ) -> ConsumerHeartbeatResponse:
        self.validate(request)
        # 1. Leaving.
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(request, now_ms, change)
        # 2. The group.
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise KafkaError(ErrorCode.group_id_not_found, f"group {request.group_id} not found")
            group = self.groups[request.group_id] = ConsumerGroup(request.group_id)
        # 3. The member.
        member, bump = self._member_for(group, request)
        # 4. Subscription and metadata.
        updated = member.with_changes(
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms >= 0
                else member.rebalance_timeout_ms
            ),
            subscribed_topics=(
                frozenset(request.subscribed_topics)
                if request.subscribed_topics is not None
                else member.subscribed_topics
            ),
            subscribed_regex=(
                member.subscribed_regex
                if request.subscribed_topic_regex is None
                else request.subscribed_topic_regex or None
            ),
            server_assignor=request.server_assignor or member.server_assignor,
            client_id=request.client_id,
            client_host=request.client_host,
        )
        updated = self.regexes.resolve(
            updated, request.topic_filter, same_regex=updated.subscribed_regex == member.subscribed_regex
        )
        trigger = history.MEMBER_JOINED if bump else None
        if trigger is None and (
            updated.topics != member.topics
            or updated.subscribed_regex != member.subscribed_regex
            or updated.server_assignor != member.server_assignor
        ):
            trigger = history.SUBSCRIPTION_CHANGED
        group.put_member(updated)
        self.regexes.remember(group.group_id, updated.member_id, request.topic_filter)
        # 5. The group epoch and the target assignment.
        self.advance_epoch(group, trigger, updated.member_id, now_ms)
        # 6. Reconciliation.
        before = group.members[updated.member_id]
        after = reconcile(
            before,
            group.target.get(before.member_id, {}),
            group.target_epoch,
            group.owner_of,
            request.owned,
        )
        group.put_member(after)
        # 7. Deadlines.
        self.timers.schedule_session(group.group_id, after, now_ms)
        rebalance_key = timer_keys.rebalance_key(group.group_id, after.member_id)
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if (
                before.state is not MemberState.UNREVOKED_PARTITIONS
                or self._timer.deadline(rebalance_key) is None
            ):
                self._timer.schedule(rebalance_key, now_ms + after.rebalance_timeout_ms)
        else:
            self._timer.cancel(rebalance_key)
        if group.state is ConsumerGroupState.STABLE:
            group.history.stable_at(group.group_epoch, now_ms)
        full = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            request.owned is not None and not same(request.owned, after.assigned)
        )
        changed = after.member_epoch != request.member_epoch or not same(after.assigned, before.assigned)
        return ConsumerHeartbeatResponse(
            member_id=after.member_id,
            member_epoch=after.member_epoch,
            heartbeat_interval_ms=self.timers.heartbeat_interval_ms(group.group_id),
            assignment=after.assigned if full or changed else None,
        )

    def validate(self, request: ConsumerHeartbeatRequest) -> None:
        """The checks that need no group: INVALID_REQUEST and UNSUPPORTED_ASSIGNOR."""
        validate_heartbeat(request, self._targets.names)

    def _member_for(
        self, group: ConsumerGroup, request: ConsumerHeartbeatRequest
    ) -> tuple[ConsumerGroupMember, bool]:
        """The member this heartbeat is for, and whether its arrival bumps the group epoch."""
        if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
            member = group.members.get(request.member_id)
            if member is None:
                raise KafkaError(ErrorCode.unknown_member_id, f"member {request.member_id} is unknown")
            check_epoch(member, request)
            return member, False
        member_id = request.member_id or self._new_member_id()
        if request.instance_id is not None:
            existing = group.member_by_instance(request.instance_id)
            if existing is not None and existing.member_id != member_id:
                # A classic static member is replaced at once by its consumer-protocol successor.
                if (
                    existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                    and not existing.uses_classic_protocol
                ):
                    raise KafkaError(
                        ErrorCode.unreleased_instance_id,
                        f"static member {request.instance_id} is still in use by {existing.member_id}",
                    )
                return self._replace_static(group, existing, member_id), False
        member = group.members.get(member_id)
        if member is not None:
            # A classic member rolled to the consumer protocol under its id speaks it from now on.
            return member.with_changes(member_epoch=JOIN_GROUP_MEMBER_EPOCH, classic=None), False
        if len(group.members) >= self._config.max_size:
            raise KafkaError(ErrorCode.group_max_size_reached, f"group {group.group_id} is full")
        return ConsumerGroupMember(member_id=member_id), True

    def _replace_static(
        self, group: ConsumerGroup, old: ConsumerGroupMember, member_id: str
    ) -> ConsumerGroupMember:
        """A static member back under a new member id takes over its assignment without a rebalance."""
        self.hand_over_static(group, old, member_id)
        return old.with_changes(member_id=member_id, member_epoch=group.target_epoch, classic=None)

    def hand_over_static(self, group: ConsumerGroup, old: ConsumerGroupMember, member_id: str) -> None:
        """Take the static member ``old`` out of the group, its target assignment kept for ``member_id``."""
        target = group.target.get(old.member_id, {})
        group.remove_member(old.member_id)
        self._forget_member(group.group_id, old.member_id)
        group.target[member_id] = target

    def _leave(
        self, request: ConsumerHeartbeatRequest, now_ms: int, change: ConsumerGroupChange
    ) -> ConsumerHeartbeatResponse:
        group = self.groups.get(request.group_id)
        member = group.members.get(request.member_id) if group is not None else None
        if group is None or member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"member {request.member_id} is unknown")
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and member.is_static:
            # Keeps its assignment until it rejoins or its session expires.
            group.put_member(member.with_changes(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH))
            self._timer.cancel(timer_keys.rebalance_key(group.group_id, member.member_id))
        else:
            self.remove_member(group, member.member_id, history.MEMBER_LEFT, now_ms, change)
        return ConsumerHeartbeatResponse(
            member_id=member.member_id,
            member_epoch=request.member_epoch,
            heartbeat_interval_ms=0,
        )

    # -- assignment

    def advance_epoch(self, group: ConsumerGroup, trigger: str | None, member_id: str, now_ms: int) -> None:
        """After ``member_id`` was put into the group: bump the group epoch for ``trigger`` (or,
        without one, for changed partition counts), then compute the target assignment if it lags."""
        if self._refresh_counts(group) and trigger is None:
            trigger = history.METADATA_CHANGED
        if trigger is not None:
            group.group_epoch += 1
            group.history.bumped(group.group_epoch, trigger, member_id, now_ms)
        if group.group_epoch > group.target_epoch:
            self._targets.compute(group)

    def refresh_metadata(self, group: ConsumerGroup, now_ms: int) -> bool:
        """Re-read the partition counts of the subscribed topics; a change bumps the group epoch."""
        if not self._refresh_counts(group):
            return False
        group.group_epoch += 1
        group.history.bumped(group.group_epoch, history.METADATA_CHANGED, None, now_ms)
        return True

    def _refresh_counts(self, group: ConsumerGroup) -> bool:
        counts: dict[str, int] = {}
        for topic in group.subscribed_topics():
            count = self.partition_count(topic)
            if count is not None and count > 0:
                counts[topic] = count
        if counts == group.partitions_per_topic:
            return False
        group.partitions_per_topic = counts
        return True

    def on_topics_changed(self, topic: str, now_ms: int) -> ConsumerGroupChange:
        """A topic grew, appeared or was deleted: its subscribers' groups get a new epoch at once
        (regex subscriptions are resolved again first)."""
        change = ConsumerGroupChange()
        for group in self.groups.values():
            before = self.snapshot(group.group_id)
            resolved = self.regexes.resolve_group(group)
            if resolved or topic in group.subscribed_topics():
                if not self.refresh_metadata(group, now_ms) and resolved:
                    group.group_epoch += 1
                    group.history.bumped(group.group_epoch, history.SUBSCRIPTION_CHANGED, None, now_ms)
                self.record(group.group_id, before, change)
        return change

    def on_regex_matched(self, job: RegexJob, names: frozenset[str], now_ms: int) -> ConsumerGroupChange:
        """A regex matched off the event loop (:class:`RegexJob`): the groups subscribed with it are
        resolved again, and get a new epoch when a member's topics changed."""
        change = ConsumerGroupChange()
        if not self.regexes.matched(job, names):
            return change
        for group in self.groups.values():
            if not any(member.subscribed_regex == job.regex for member in group.members.values()):
                continue
            before = self.snapshot(group.group_id)
            if self.regexes.resolve_group(group):
                if not self.refresh_metadata(group, now_ms):
                    group.group_epoch += 1
                    group.history.bumped(group.group_epoch, history.SUBSCRIPTION_CHANGED, None, now_ms)
                self.record(group.group_id, before, change)
        return change

    # -- leaving, fencing and timers

    def _forget_member(self, group_id: str, member_id: str) -> None:
        """A member leaves the group: its timers and its soft state go."""
        self.timers.cancel(group_id, member_id)
        self.regexes.forget(group_id, member_id)

    def remove_member(
        self, group: ConsumerGroup, member_id: str, trigger: str, now_ms: int, change: ConsumerGroupChange
    ) -> None:
        epoch_before = group.group_epoch
        removed = group.remove_member(member_id)
        if removed is None:
            return
        self._forget_member(group.group_id, member_id)
        self.note_departure(group, removed, epoch_before, change)
        group.group_epoch += 1
        group.history.bumped(group.group_epoch, trigger, member_id, now_ms)
        if not group.members:
            group.target = {}
            group.target_epoch = group.group_epoch

    def note_connection(self, group_id: str, member_id: str, connection_id: int) -> None:
        if group_id in self.groups and member_id in self.groups[group_id].members:
            self.timers.note_connection(group_id, member_id, connection_id)

    def member_disconnected(self, group_id: str, member_id: str, connection_id: int, now_ms: int) -> None:
        """The member's current connection closed: a dynamic member keeps its place only briefly."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None and not member.is_static:
            self.timers.connection_closed(group_id, member_id, connection_id, now_ms)

    def on_timer(self, key: str, now_ms: int) -> ConsumerGroupChange | None:
        """Handle a fired key of ours; None when the key is not a consumer group's."""
        target = timer_keys.parse_key(key)
        if target is None:
            return None
        change = ConsumerGroupChange()
        group = self.groups.get(target.group_id)
        if group is None or target.member_id not in group.members:
            return change
        member = group.members[target.member_id]
        if target.kind == timer_keys.REBALANCE and member.state is not MemberState.UNREVOKED_PARTITIONS:
            return change
        before = self.snapshot(group.group_id)
        trigger = history.SESSION_EXPIRED if target.kind == timer_keys.SESSION else history.REBALANCE_TIMEOUT
        self.remove_member(group, target.member_id, trigger, now_ms, change)
        self.record(group.group_id, before, change)
        return change

    # -- online migration (see kcoord.coordinator.migration)

    def adopt(self, group: ConsumerGroup, now_ms: int) -> ConsumerGroupChange:
        """A group converted from a classic one joins this manager: its records and sessions."""
        change = ConsumerGroupChange()
        self.groups[group.group_id] = group
        group.history.bumped(group.group_epoch, history.UPGRADED, None, now_ms)
        self.record(group.group_id, GroupSnapshot(), change)
        for member in group.members.values():
            self.timers.schedule_session(group.group_id, member, now_ms)
        return change

    def release(self, group_id: str) -> ConsumerGroupChange:
        """Hand a group over for its conversion to a classic group: its tombstones."""
        change = ConsumerGroupChange()
        before = self.snapshot(group_id)
        group = self.groups.pop(group_id)
        for member_id in group.members:
            self._forget_member(group_id, member_id)
        self.record(group_id, before, change)
        return change

    def note_departure(
        self, group: ConsumerGroup, gone: ConsumerGroupMember, epoch_before: int, change: ConsumerGroupChange
    ) -> None:
        """A member left or was replaced: when it was the last one of the consumer protocol and
        classic members remain, the group is due for a downgrade (if the policy allows)."""
        if (
            not gone.uses_classic_protocol
            and group.members
            and all(m.uses_classic_protocol for m in group.members.values())
            and self._config.downgrades_to_classic
        ):
            change.downgrades.setdefault(group.group_id, epoch_before)

    def unload(self) -> None:
        for group in self.groups.values():
            for member_id in group.members:
                self._forget_member(group.group_id, member_id)
        self.groups.clear()
        self.timers.forget_connections()
        self.regexes.clear()

    # -- offsets and admin

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        validate_offset_fetch(self.groups.get(group_id), member_id, member_epoch)

    def validate_offset_commit(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int
    ) -> None:
        validate_offset_commit(self.groups[group_id], member_id, member_epoch, api_version)

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and topic in group.subscribed_topics()

    def describe(self, group_id: str) -> DescribedConsumerGroup | None:
        group = self.groups.get(group_id)
        return None if group is None else describe(group, self._targets.default_name)

    def listed(self, states_filter: Collection[str] | None) -> list[tuple[str, str]]:
        """(group id, state) of every live group whose state passes the filter (case-insensitive)."""
        return listed(self.groups.values(), states_filter)

    def delete_group(self, group_id: str) -> ConsumerGroupChange:
        """Only an Empty group can be deleted (GROUP_NOT_EMPTY otherwise): its tombstones."""
        group = self.groups[group_id]
        if group.members:
            raise KafkaError(ErrorCode.non_empty_group, f"group {group_id} is not empty")
        change = ConsumerGroupChange()
        before = self.snapshot(group_id)
        group.dead = True
        del self.groups[group_id]
        self.record(group_id, before, change)
        return change
