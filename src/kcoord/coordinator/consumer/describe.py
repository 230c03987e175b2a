"""What ConsumerGroupDescribe and ListGroups see of consumer groups (reads; nothing changes)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import replace

from kcoord.coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from kcoord.coordinator.consumer.messages import DescribedConsumerGroup, DescribedConsumerMember


def describe(group: ConsumerGroup, default_assignor: str) -> DescribedConsumerGroup:
    """DescribeGroups' view of a consumer group: members, target assignments, epoch history."""
    members = tuple(
        DescribedConsumerMember(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topics=tuple(sorted(m.subscribed_topics)),
            subscribed_regex=m.subscribed_regex,
            assignment=m.assigned,
            target_assignment=group.target.get(m.member_id, {}),
            uses_classic_protocol=m.uses_classic_protocol,
        )
        for m in group.members.values()
    )
    return DescribedConsumerGroup(
        group_id=group.group_id,
        state=group.state.value,
        group_epoch=group.group_epoch,
        target_epoch=group.target_epoch,
        assignor=group.assignor or default_assignor,
        members=members,
        history=tuple(replace(bump) for bump in group.history.bumps),
    )


def listed(groups: Iterable[ConsumerGroup], states_filter: Collection[str] | None) -> list[tuple[str, str]]:
    """(group id, state) of every live group whose state passes the filter (case-insensitive)."""
    wanted = {s.lower() for s in states_filter} if states_filter else None
    return [
        (group.group_id, group.state.value)
        for group in groups
        if group.state is not ConsumerGroupState.DEAD
        and (wanted is None or group.state.value.lower() in wanted)
    ]
