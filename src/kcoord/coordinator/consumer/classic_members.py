"""Members of a consumer group that speak the classic protocol (KIP-848 online migration).

While a group migrates, some of its members still send JoinGroup, SyncGroup, Heartbeat and
LeaveGroup. The consumer group answers them itself, as Kafka's ``classicGroup*ToConsumerGroup``:

- JoinGroup updates the member's subscription (from its embedded consumer protocol), bumps the
  group epoch when it changed, lets the server-side assignor compute the target and reconciles
  the member with the partitions it says it owns. It is answered at once: generation = the
  member's epoch, no leader work (the members list is empty), then a SyncGroup must follow
  within the rebalance timeout.
- SyncGroup returns the member's current assignment in its protocol's bytes, or
  REBALANCE_IN_PROGRESS when the group moved on and the member must rejoin first.
- Heartbeat keeps the session and answers REBALANCE_IN_PROGRESS when the member must rejoin:
  the group epoch is ahead of it, it must revoke partitions, or partitions it waited for are
  free now. A member told to rejoin that does not within its rebalance timeout is fenced.
- LeaveGroup removes the members (by id or instance id) and bumps the group epoch.
"""

from __future__ import annotations

from kcoord.coordinator.classic.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    ConsumerSubscription,
    assignment_bytes,
    decode_subscription,
    owned_partitions,
)
from kcoord.coordinator.classic.group import ClassicGroupMember
from kcoord.coordinator.classic.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kcoord.coordinator.consumer import history, timer_keys
from kcoord.coordinator.consumer.change import ConsumerGroupChange
from kcoord.coordinator.consumer.group import ConsumerGroup
from kcoord.coordinator.consumer.manager import ConsumerGroupManager
from kcoord.coordinator.consumer.member import ConsumerGroupMember, MemberState
from kcoord.coordinator.consumer.reconcile import reconcile
from kcoord.coordinator.records import ClassicMemberMetadata
from kcoord.protocol.errors import ErrorCode, KafkaError

MEMBER_ID_REQUIRED_SINCE = 4
"""JoinGroup v4+: a dynamic member without an id is given one and must join again with it."""


class ClassicMemberRequests:
    """The classic group APIs for members of the consumer groups of one shard."""

    def __init__(self, manager: ConsumerGroupManager) -> None:
        self._manager = manager

    # -- JoinGroup

    def join(self, request: JoinGroupRequest, sink: object, now_ms: int) -> ConsumerGroupChange:
        """The JoinGroup's change, answered with its response or with the code a check refused it with."""
        change = ConsumerGroupChange()
        before = self._manager.snapshot(request.group_id)
        try:
            response = self._checked_join(request, now_ms, change)
        except KafkaError as exc:
            response = JoinGroupResponse(exc.code, member_id=request.member_id)
        self._manager.record(request.group_id, before, change)
        change.respond(sink, response)
        return change

    def _checked_join(
        self, request: JoinGroupRequest, now_ms: int, change: ConsumerGroupChange
    ) -> JoinGroupResponse:
        manager = self._manager
        group = manager.groups[request.group_id]
        member_id = request.member_id or manager.new_member_id()
        if member_id not in group.members and len(group.members) >= manager.config.max_size:
            raise KafkaError(ErrorCode.group_max_size_reached, f"group {group.group_id} is full")
        if not _supports(group, request):
            raise KafkaError(
                ErrorCode.inconsistent_group_protocol, f"member {member_id}'s protocols are not supported"
            )
        if (
            not request.member_id
            and request.group_instance_id is None
            and request.api_version >= MEMBER_ID_REQUIRED_SINCE
        ):
            return JoinGroupResponse(ErrorCode.member_id_required, member_id=member_id)
        subscription = _subscription(request)
        return self._join(group, request, member_id, subscription, now_ms, change)

    def _join(
        self,
        group: ConsumerGroup,
        request: JoinGroupRequest,
        member_id: str,
        subscription: ConsumerSubscription,
        now_ms: int,
        change: ConsumerGroupChange,
    ) -> JoinGroupResponse:
        manager = self._manager
        # 1. The member: known, new, or a static member back under a new id.
        member, replaced = self._member_for(group, request, member_id)
        new = member.member_id not in group.members
        updated = as_classic_joined(member, request, subscription)
        # 2. The group epoch moves when membership, subscriptions or partition counts change.
        trigger = history.MEMBER_JOINED if new else None
        if trigger is None and updated.topics != member.topics:
            trigger = history.SUBSCRIPTION_CHANGED
        group.put_member(updated)
        # 3. The target assignment, then the member's next step towards it.
        manager.advance_epoch(group, trigger, updated.member_id, now_ms)
        after = reconcile(
            updated,
            group.target.get(updated.member_id, {}),
            group.target_epoch,
            group.owner_of,
            owned_partitions(subscription.owned_partitions),
        )
        group.put_member(after)
        if replaced is not None:
            # A consumer-protocol instance rolled back to classic may leave only classic members:
            # Kafka's downgrade on a replaced static member (the shard converts the group).
            manager.note_departure(group, replaced, group.group_epoch, change)
        # 4. Deadlines: its session, and the SyncGroup that must follow.
        timer = manager.timers.timer
        timer.cancel(timer_keys.join_key(group.group_id, after.member_id))
        manager.timers.schedule_session(group.group_id, after, now_ms)
        timer.schedule(
            timer_keys.sync_key(group.group_id, after.member_id), now_ms + request.rebalance_timeout_ms
        )
        return JoinGroupResponse(
            ErrorCode.none,
            generation_id=after.member_epoch,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=request.protocols[0][0],
            member_id=after.member_id,
        )

    def _member_for(
        self, group: ConsumerGroup, request: JoinGroupRequest, member_id: str
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """The member, and the static member it replaces (if any)."""
        instance_id = request.group_instance_id
        if instance_id is not None:
            existing = group.member_by_instance(instance_id)
            if existing is not None and existing.member_id != member_id:
                if request.member_id:
                    raise KafkaError(
                        ErrorCode.fenced_instance_id, f"instance {instance_id} belongs to another member"
                    )
                # A static member back under a new id keeps its place and its partitions.
                self._manager.hand_over_static(group, existing, member_id)
                replaced = existing.with_changes(member_id=member_id)
                group.put_member(replaced)
                return replaced, existing
        return group.members.get(member_id) or ConsumerGroupMember(member_id=member_id), None

    # -- SyncGroup

    def sync(self, request: SyncGroupRequest, now_ms: int) -> SyncGroupResponse:
        """Raises :class:`KafkaError` with the code the SyncGroup is answered with."""
        group = self._manager.groups[request.group_id]
        member = _classic_member(group, request.member_id, request.group_instance_id)
        _check_generation(member, request.generation_id)
        protocol_name = _protocol_name(member)
        if (request.protocol_type is not None and request.protocol_type != PROTOCOL_TYPE) or (
            request.protocol_name is not None and request.protocol_name != protocol_name
        ):
            raise KafkaError(ErrorCode.inconsistent_group_protocol, "protocol differs from the join's")
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout(group, member, now_ms)
            raise KafkaError(ErrorCode.rebalance_in_progress, f"group {group.group_id} moved on")
        self._manager.timers.timer.cancel(timer_keys.sync_key(group.group_id, member.member_id))
        self._manager.timers.schedule_session(group.group_id, member, now_ms)
        return SyncGroupResponse(
            ErrorCode.none,
            protocol_type=request.protocol_type,
            protocol_name=request.protocol_name,
            assignment=assignment_bytes(member.assigned, _subscription_version(member)),
        )

    # -- Heartbeat

    def heartbeat_code(self, request: HeartbeatRequest, now_ms: int) -> ErrorCode:
        group = self._manager.groups[request.group_id]
        try:
            member = _classic_member(group, request.member_id, request.group_instance_id)
            _check_generation(member, request.generation_id)
        except KafkaError as exc:
            return exc.code
        self._manager.timers.schedule_session(group.group_id, member, now_ms)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not _waiting_on_others(group, member))
        ):
            self._schedule_join_timeout(group, member, now_ms)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def _schedule_join_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember, now_ms: int) -> None:
        key = timer_keys.join_key(group.group_id, member.member_id)
        if self._manager.timers.timer.deadline(key) is None:
            self._manager.timers.timer.schedule(key, now_ms + member.rebalance_timeout_ms)

    # -- LeaveGroup

    def leave(self, request: LeaveGroupRequest, sink: object, now_ms: int) -> ConsumerGroupChange:
        """The LeaveGroup's change: each member's answer, the records of those who left."""
        manager = self._manager
        change = ConsumerGroupChange()
        group = manager.groups[request.group_id]
        before = manager.snapshot(group.group_id)
        answers: list[LeftMember] = []
        for leaving in request.members:
            try:
                if leaving.group_instance_id is None:
                    member = _classic_member(group, leaving.member_id, None)
                else:
                    found = group.member_by_instance(leaving.group_instance_id)
                    if found is None:
                        raise KafkaError(ErrorCode.unknown_member_id, "unknown instance id")
                    if leaving.member_id and leaving.member_id != found.member_id:
                        raise KafkaError(ErrorCode.fenced_instance_id, "instance of another member")
                    member = _classic_member(group, found.member_id, None)
            except KafkaError as exc:
                answers.append(LeftMember(leaving.member_id, leaving.group_instance_id, exc.code))
                continue
            manager.remove_member(group, member.member_id, history.MEMBER_LEFT, now_ms, change)
            answers.append(LeftMember(member.member_id, leaving.group_instance_id, ErrorCode.none))
        manager.record(group.group_id, before, change)
        change.respond(sink, LeaveGroupResponse(ErrorCode.none, tuple(answers)))
        return change


def _supports(group: ConsumerGroup, request: JoinGroupRequest) -> bool:
    """Kafka's ``supportsClassicProtocols``: type ``consumer`` and, once the group has classic
    members, a protocol every one of them supports."""
    if request.protocol_type != PROTOCOL_TYPE or not request.protocols:
        return False
    names = {name for name, _ in request.protocols}
    for member in group.members.values():
        if member.classic is not None and member.member_id != request.member_id:
            names &= {name for name, _ in member.classic.supported_protocols}
    return bool(names)


def as_classic_joined(
    member: ConsumerGroupMember,
    declared: JoinGroupRequest | ClassicGroupMember,
    subscription: ConsumerSubscription,
) -> ConsumerGroupMember:
    """``member`` as a classic member's JoinGroup (or its classic group's record of it) declares it:
    its client, timeouts and protocols, and the subscription embedded in those protocols (topic
    names only: no regex, no assignor of its own)."""
    return member.with_changes(
        instance_id=declared.group_instance_id,
        rack_id=subscription.rack_id,
        rebalance_timeout_ms=declared.rebalance_timeout_ms,
        subscribed_topics=frozenset(subscription.topics),
        subscribed_regex=None,
        regex_topics=frozenset(),
        server_assignor=None,
        client_id=declared.client_id,
        client_host=declared.client_host,
        classic=ClassicMemberMetadata(declared.session_timeout_ms, declared.protocols),
    )


def _subscription(request: JoinGroupRequest) -> ConsumerSubscription:
    try:
        return decode_subscription(request.protocols[0][1])
    except ConsumerProtocolError as exc:
        raise KafkaError(ErrorCode.inconsistent_group_protocol, f"malformed subscription: {exc}") from None


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    """The member a classic request is for: UNKNOWN_MEMBER_ID (also for a consumer-protocol
    member) or FENCED_INSTANCE_ID as Kafka's ``validateConsumerGroupMember``."""
    if instance_id is not None:
        member = group.member_by_instance(instance_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"instance {instance_id} is unknown")
        if member.member_id != member_id:
            raise KafkaError(ErrorCode.fenced_instance_id, f"instance {instance_id} is another member's")
    else:
        found = group.members.get(member_id)
        if found is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"member {member_id} is unknown")
        member = found
    if member.classic is None:
        raise KafkaError(ErrorCode.unknown_member_id, f"member {member_id} does not use the classic protocol")
    return member


def _check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
    if generation_id != member.member_epoch:
        raise KafkaError(
            ErrorCode.illegal_generation,
            f"generation {generation_id} is not the member's epoch {member.member_epoch}",
        )


def _protocol_name(member: ConsumerGroupMember) -> str:
    assert member.classic is not None
    return member.classic.supported_protocols[0][0]


def _subscription_version(member: ConsumerGroupMember) -> int:
    assert member.classic is not None
    try:
        return decode_subscription(member.classic.supported_protocols[0][1]).version
    except ConsumerProtocolError:
        return 0


def _waiting_on_others(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a target partition of the member is still owned by another member."""
    for topic, parts in group.target.get(member.member_id, {}).items():
        held = member.assigned.get(topic, frozenset())
        for partition in parts - held:
            owner = group.owner_of(topic, partition)
            if owner is not None and owner != member.member_id:
                return True
    return False
