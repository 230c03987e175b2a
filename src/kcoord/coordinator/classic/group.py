"""One classic group and its members: bookkeeping only, no timers and no responses.

The rules that need the clock, the timer or the ability to answer a parked request live in
:mod:`kcoord.coordinator.classic.rebalance`; this module keeps the counts and invariants
(Kafka's ``ClassicGroup``/``ClassicGroupMember``): protocol votes, static instance ids,
pending and awaiting members, the leader.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from kcoord.coordinator.classic.consumer_protocol import (
    PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE,
)
from kcoord.coordinator.classic.consumer_protocol import (
    ConsumerProtocolError,
    decode_subscription,
)
from kcoord.coordinator.classic.history import RebalanceRecord, new_history
from kcoord.coordinator.classic.messages import (
    JoinGroupMember,
    JoinGroupResponse,
    Protocols,
    SyncGroupResponse,
)
from kcoord.coordinator.classic.state import ClassicGroupState, can_transition
from kcoord.coordinator.records import GroupMetadataValue, MemberMetadata
from kcoord.protocol.errors import ErrorCode, KafkaError


@dataclass(slots=True)
class Waiter:
    """A parked request: the opaque sink the answer goes to."""

    sink: Any


@dataclass(slots=True)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    # A member added in the current rebalance; its session is not kept alive by a parked join.
    is_new: bool = False
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    # Liveness hints (kcoord's fast failover): the connection that last carried this member's
    # requests, when it last heartbeat, the interval observed between heartbeats, and when that
    # connection closed without a LeaveGroup (None while connected).
    session_timer_key: str = ""
    """The member's session deadline key, made once: the heartbeat path moves it every few seconds."""
    connection_id: int | None = None
    last_heartbeat_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    disconnected_ms: int | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def has_satisfied_heartbeat(self) -> bool:
        """Members parked in a join or a sync count as alive, except new ones."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name!r}")

    def under_new_id(self, member_id: str) -> ClassicGroupMember:
        """The same member (what it declared and its assignment) under ``member_id``, without the soft
        state tied to the old id: no waiter, no session timer key, no liveness hints, not new."""
        return replace(
            self,
            member_id=member_id,
            is_new=False,
            join_waiter=None,
            sync_waiter=None,
            session_timer_key="",
            connection_id=None,
            last_heartbeat_ms=None,
            heartbeat_interval_ms=None,
            disconnected_ms=None,
        )

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True)
class InitialDelay:
    """State of the initial delayed join: a group that was Empty waits for more members.

    The join phase ends once ``delay_ms`` passed with no new member arriving, and never after
    ``limit_ms`` (the first join plus the rebalance timeout). Kafka extends the wait by whole
    delays instead, so ten consumers started together wait at least two delays; a quiet period
    gives the same single rebalance one delay after the last of them arrived.
    """

    delay_ms: int
    limit_ms: int
    last_arrival_ms: int


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    previous_state: ClassicGroupState = ClassicGroupState.DEAD
    state_timestamp_ms: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_join_members: set[str] = field(default_factory=set)
    pending_sync_members: set[str] = field(default_factory=set)
    supported_protocol_counts: dict[str, int] = field(default_factory=dict)
    awaiting_join_count: int = 0
    new_member_added: bool = False
    initial_delay: InitialDelay | None = None
    subscribed_topics: frozenset[str] | None = None
    history: deque[RebalanceRecord] = field(default_factory=new_history)

    # -- state -------------------------------------------------------------------------------

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    def transition_to(self, target: ClassicGroupState, now_ms: int) -> ClassicGroupState:
        """Move to ``target``; returns the old state. An illegal move is a bug, not a client error."""
        if not can_transition(self.state, target):
            raise RuntimeError(f"group {self.group_id}: illegal transition {self.state} -> {target}")
        self.previous_state, self.state = self.state, target
        self.state_timestamp_ms = now_ms
        return self.previous_state

    def can_rebalance(self) -> bool:
        return can_transition(self.state, ClassicGroupState.PREPARING_REBALANCE)

    @property
    def current_rebalance(self) -> RebalanceRecord | None:
        if self.history and self.history[-1].outcome == "in_progress":
            return self.history[-1]
        return None

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # -- membership --------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: ClassicGroupMember, waiter: Waiter | None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"instance {member.group_instance_id} is already a member")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type or not self.supports_protocols(
            member.protocol_type, {name for name, _ in member.protocols}
        ):
            raise RuntimeError(f"member {member.member_id} does not fit group {self.group_id}")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, +1)
        member.join_waiter = waiter
        if waiter is not None:
            self.awaiting_join_count += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        """Forget a member (and any pending id); the leader moves to the first remaining member."""
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self._count_protocols(removed, -1)
            if removed.join_waiter is not None:
                self.awaiting_join_count -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return removed

    def update_member(
        self,
        member: ClassicGroupMember,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: Waiter | None,
    ) -> Waiter | None:
        """Replace the member's protocols and timeouts and park ``waiter``; returns a superseded waiter."""
        self._count_protocols(member, -1)
        member.protocols = protocols
        self._count_protocols(member, +1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        superseded = member.join_waiter
        if waiter is not None and superseded is None:
            self.awaiting_join_count += 1
        elif waiter is None and superseded is not None:
            self.awaiting_join_count -= 1
        member.join_waiter = waiter
        return superseded

    def take_join_waiter(self, member: ClassicGroupMember) -> Waiter | None:
        """Unpark the member's JoinGroup (the caller answers it)."""
        waiter = member.join_waiter
        if waiter is not None:
            member.join_waiter = None
            self.awaiting_join_count -= 1
        return waiter

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> ClassicGroupMember:
        """Give the instance's member a new id, keeping everything else; parked waiters stay on the old."""
        old = self.members.pop(old_member_id)
        if old.join_waiter is not None:
            raise RuntimeError("answer the old member's parked join before replacing it")
        new = old.under_new_id(new_member_id)
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return new

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """Kafka's ``validateMember``: UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID for a stale static id."""
        if group_instance_id is not None:
            holder = self.static_members.get(group_instance_id)
            if holder is None:
                raise KafkaError(ErrorCode.unknown_member_id)
            if holder != member_id:
                raise KafkaError(ErrorCode.fenced_instance_id)
        if member_id not in self.members:
            raise KafkaError(ErrorCode.unknown_member_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count and not self.pending_join_members

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [member for member in self.members.values() if not member.is_awaiting_join]

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        """The group's rebalance timeout: the maximum over its members."""
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    # -- protocols ---------------------------------------------------------------------------

    def _count_protocols(self, member: ClassicGroupMember, delta: int) -> None:
        # Once per name: a member listing a protocol twice must not count as two supporters.
        for name in {name for name, _ in member.protocols}:
            self.supported_protocol_counts[name] = self.supported_protocol_counts.get(name, 0) + delta

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        """Whether a member with these protocols may join (Kafka's ``supportsProtocols``)."""
        if self.state is ClassicGroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        everyone = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocol_counts.get(name, 0) == everyone for name in protocol_names
        )

    def select_protocol(self) -> str:
        """Each member votes for its first choice among the protocols all members support."""
        everyone = len(self.members)
        candidates = {name for name, count in self.supported_protocol_counts.items() if count == everyone}
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members subscribe to, or None when unknown (not ``consumer`` or unparsable)."""
        if not self.uses_consumer_protocol:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol_name)).topics)
        except (ConsumerProtocolError, ValueError):
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol
        return topic in self.subscribed_topics

    # -- views -------------------------------------------------------------------------------

    def join_members(self) -> tuple[JoinGroupMember, ...]:
        """What the leader gets in its JoinGroup response."""
        return tuple(
            JoinGroupMember(member.member_id, member.group_instance_id, member.metadata(self.protocol_name))
            for member in self.members.values()
        )

    def join_response(self, member_id: str, *, with_members: bool = True) -> JoinGroupResponse:
        """The current generation as ``member_id``'s JoinGroup answer; the leader's carries every
        member's metadata unless ``with_members`` is False."""
        return JoinGroupResponse(
            ErrorCode.none,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            member_id=member_id,
            members=self.join_members() if with_members and self.is_leader(member_id) else (),
        )

    def sync_response(
        self, member: ClassicGroupMember, error: ErrorCode = ErrorCode.none
    ) -> SyncGroupResponse:
        """``member``'s assignment as its SyncGroup answer; an error answer names no protocol."""
        ok = error is ErrorCode.none
        return SyncGroupResponse(
            error,
            protocol_type=self.protocol_type if ok else None,
            protocol_name=self.protocol_name if ok else None,
            assignment=member.assignment,
        )

    def group_assignment(self) -> dict[str, bytes]:
        return {member_id: member.assignment for member_id, member in self.members.items()}

    def metadata_value(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        """The GroupMetadata record value for the current generation with ``assignment``."""
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=-1 if self.state_timestamp_ms is None else self.state_timestamp_ms,
            members=tuple(
                MemberMetadata(
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    rebalance_timeout=member.rebalance_timeout_ms,
                    session_timeout=member.session_timeout_ms,
                    subscription=member.metadata(self.protocol_name),
                    assignment=assignment.get(member.member_id, b""),
                )
                for member in self.members.values()
            ),
        )
