"""Online migration of a live group between the classic and the consumer (KIP-848) protocol.

Kafka 4's ``group.consumer.migration.policy``: a ConsumerGroupHeartbeat joining a classic group
converts it into a consumer group (upgrade), and a consumer group whose last consumer-protocol
member left while classic members remain converts back (downgrade). Both conversions keep the
members, their ids and their partitions; committed offsets are keyed by group id and stay.

- Upgrade (:func:`consumer_group_from_classic`): the group epoch and every member's epoch are the
  classic generation; each member is Stable with its last classic assignment as both its current
  and its target assignment, and keeps its JoinGroup protocols (and session timeout) so that it
  can go on with JoinGroup/SyncGroup/Heartbeat. The joining member then bumps the group epoch,
  which tells the classic members to rejoin.
- Downgrade (:func:`classic_group_from_consumer`): a Stable classic group at the group epoch from
  before the leave that triggered it (the generation reconciled classic members heartbeat with,
  so they are told REBALANCE_IN_PROGRESS rather than ILLEGAL_GENERATION, which would make them
  drop their partitions without committing), each member's target assignment in its protocol's
  bytes; the caller then starts a rebalance so that the members agree on an assignment of their own.

Only pure conversions live here; the shard writes the records (the old group's tombstones, then
the new group's records) and arms the timers.
"""

from __future__ import annotations

from kcoord.coordinator.assignors.api import Assignment
from kcoord.coordinator.classic.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    assignment_bytes,
    decode_assignment,
    decode_subscription,
)
from kcoord.coordinator.classic.group import ClassicGroup, ClassicGroupMember
from kcoord.coordinator.classic.state import ClassicGroupState
from kcoord.coordinator.consumer.classic_members import as_classic_joined
from kcoord.coordinator.consumer.config import PartitionCount
from kcoord.coordinator.consumer.group import ConsumerGroup
from kcoord.coordinator.consumer.member import ConsumerGroupMember, MemberState


class MigrationError(ValueError):
    """The group cannot be converted (its embedded consumer protocol is unreadable)."""


def consumer_group_from_classic(classic: ClassicGroup, partition_count: PartitionCount) -> ConsumerGroup:
    """The consumer group a live classic ``consumer`` group becomes (Kafka's ``fromClassicGroup``).

    Partitions of topics that no longer exist are dropped. Raises :class:`MigrationError` when a
    member's subscription or assignment cannot be decoded; the classic group is left untouched."""
    if classic.protocol_type != PROTOCOL_TYPE or classic.protocol_name is None:
        raise MigrationError(f"group {classic.group_id} does not use the consumer protocol")
    group = ConsumerGroup(classic.group_id)
    group.group_epoch = group.target_epoch = classic.generation_id
    for old in classic.members.values():
        try:
            subscription = decode_subscription(old.metadata(classic.protocol_name))
            assigned = _existing(
                decode_assignment(old.assignment).assigned_partitions if old.assignment else (),
                partition_count,
            )
        except (ConsumerProtocolError, ValueError) as exc:
            raise MigrationError(f"member {old.member_id}: {exc}") from None
        member = as_classic_joined(ConsumerGroupMember(old.member_id), old, subscription).with_changes(
            member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id,
            state=MemberState.STABLE,
            assigned=assigned,
        )
        group.put_member(member)
        group.target[member.member_id] = assigned
    return group


def classic_group_from_consumer(group: ConsumerGroup, generation: int, now_ms: int) -> ClassicGroup:
    """The Stable classic group a consumer group of classic members becomes (``fromConsumerGroup``).

    Raises :class:`MigrationError` when a member does not speak the classic protocol, or the
    members share no protocol, or a member's subscription is unreadable."""
    members = list(group.members.values())
    if not members or not all(m.classic is not None for m in members):
        raise MigrationError(f"group {group.group_id} has members that do not use the classic protocol")
    shared = set.intersection(*({name for name, _ in _protocols(m)} for m in members))
    if not shared:
        raise MigrationError(f"the members of group {group.group_id} share no protocol")
    classic = ClassicGroup(
        group.group_id,
        state=ClassicGroupState.STABLE,
        previous_state=ClassicGroupState.EMPTY,
        state_timestamp_ms=now_ms,
        generation_id=generation,
        protocol_type=PROTOCOL_TYPE,
    )
    for member in members:
        assert member.classic is not None
        classic.add(
            ClassicGroupMember(
                member_id=member.member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                session_timeout_ms=member.classic.session_timeout_ms,
                protocol_type=PROTOCOL_TYPE,
                protocols=member.classic.supported_protocols,
            ),
            None,
        )
    classic.protocol_name = classic.select_protocol()
    for joined in classic.members.values():
        try:
            version = decode_subscription(joined.metadata(classic.protocol_name)).version
        except ConsumerProtocolError as exc:
            raise MigrationError(f"member {joined.member_id}: {exc}") from None
        joined.assignment = assignment_bytes(group.target.get(joined.member_id, {}), version)
    classic.subscribed_topics = classic.compute_subscribed_topics()
    return classic


def _protocols(member: ConsumerGroupMember) -> tuple[tuple[str, bytes], ...]:
    return member.classic.supported_protocols if member.classic is not None else ()


def _existing(
    partitions: tuple[tuple[str, tuple[int, ...]], ...], partition_count: PartitionCount
) -> Assignment:
    assigned: dict[str, frozenset[int]] = {}
    for topic, parts in partitions:
        count = partition_count(topic)
        if count is None:
            continue
        kept = frozenset(p for p in parts if 0 <= p < count)
        if kept:
            assigned[topic] = assigned.get(topic, frozenset()) | kept
    return assigned
