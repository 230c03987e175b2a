"""Move one member towards its target assignment (Kafka's ``CurrentAssignmentBuilder``).

The rule that makes incremental rebalancing safe: a partition is given to a member only once no
other member owns it. A member that must give partitions up keeps its epoch and is only assigned
what it keeps; once it reports (in ``owned``) that it no longer consumes the revoked partitions,
it moves on to the target epoch and may receive new partitions. A member whose new partitions are
still owned elsewhere is at the target epoch but waits for them (``unreleased_partitions``).
"""

from __future__ import annotations

from collections.abc import Callable

from kcoord.coordinator.assignors.api import Assignment
from kcoord.coordinator.consumer.member import ConsumerGroupMember, MemberState

OwnerOf = Callable[[str, int], str | None]
"""The member id currently owning a partition (assigned or pending revocation), or None."""


def reconcile(
    member: ConsumerGroupMember,
    target: Assignment,
    target_epoch: int,
    owner_of: OwnerOf,
    owned: Assignment | None,
) -> ConsumerGroupMember:
    """The member after this heartbeat; ``owned`` is what the member reported (None: not sent)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _still_owns(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch, target, target_epoch, owner_of, owned)
    if member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    return _next(member, member.member_epoch, target, target_epoch, owner_of, owned)


def _next(
    member: ConsumerGroupMember,
    epoch: int,
    target: Assignment,
    target_epoch: int,
    owner_of: OwnerOf,
    owned: Assignment | None,
) -> ConsumerGroupMember:
    keep: dict[str, frozenset[int]] = {}
    revoke: dict[str, frozenset[int]] = {}
    free_new: dict[str, frozenset[int]] = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        wanted = target.get(topic, frozenset())
        current = member.assigned.get(topic, frozenset())
        if wanted & current:
            keep[topic] = wanted & current
        if current - wanted:
            revoke[topic] = current - wanted
        new = frozenset(p for p in wanted - current if owner_of(topic, p) in (None, member.member_id))
        if new:
            free_new[topic] = new
        if len(new) < len(wanted - current):
            unreleased = True
    if revoke and (owned is None or _still_owns(owned, revoke)):
        return member.with_changes(
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=keep,
            pending_revocation=revoke,
        )
    assigned = dict(keep)
    for topic, parts in free_new.items():
        assigned[topic] = assigned.get(topic, frozenset()) | parts
    return member.with_changes(
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        member_epoch=target_epoch,
        previous_member_epoch=epoch,
        assigned=assigned,
        pending_revocation={},
    )


def _still_owns(owned: Assignment, revoke: Assignment) -> bool:
    return any(owned.get(topic, frozenset()) & parts for topic, parts in revoke.items())
