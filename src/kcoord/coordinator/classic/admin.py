"""Read-mostly views of the classic groups: DescribeGroups, ListGroups, DeleteGroups checks, and
what the offsets manager needs to validate commits, deletes and expiry.

DescribeGroups (15): an unknown group is described as state "Dead"; before v6 with error 0,
from v6 with GROUP_ID_NOT_FOUND. Member metadata and assignment are included only when the
group is Stable (the protocol name is known and the assignment is current).

ListGroups (16): ``states_filter`` (v4+) matches case-insensitively; an empty filter lists all.

DeleteGroups (42): missing or Dead ⇒ GROUP_ID_NOT_FOUND; members present ⇒ NON_EMPTY_GROUP.

OffsetCommit validation (Kafka's ``OffsetMetadataManager.validateOffsetCommit`` and
``ClassicGroup.validateOffsetCommit``), in order:

1. group missing: generation < 0 ⇒ create a "simple" Empty group and accept; otherwise
   ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9;
2. Dead ⇒ COORDINATOR_NOT_AVAILABLE;
3. generation < 0 and Empty ⇒ accept, whatever the member and instance ids (KAFKA-14201);
4. generation ≥ 0 or a member/instance id ⇒ member validation, then ILLEGAL_GENERATION;
5. generation < 0 and not Empty ⇒ UNKNOWN_MEMBER_ID (not for transactional commits);
6. CompletingRebalance ⇒ REBALANCE_IN_PROGRESS (not for transactional commits).
"""

from __future__ import annotations

from collections.abc import Collection

from kcoord.coordinator.classic.group import ClassicGroup
from kcoord.coordinator.classic.messages import DescribedGroup, DescribedMember, ListedGroup
from kcoord.coordinator.classic.rebalance import COMPLETING, DEAD, EMPTY, PREPARING, STABLE
from kcoord.protocol.errors import ErrorCode, KafkaError

GROUP_ID_NOT_FOUND_IN_DESCRIBE_SINCE = 6
GROUP_ID_NOT_FOUND_IN_COMMIT_SINCE = 9


def describe(group_id: str, group: ClassicGroup | None, api_version: int) -> DescribedGroup:
    if group is None:
        error = (
            ErrorCode.group_id_not_found
            if api_version >= GROUP_ID_NOT_FOUND_IN_DESCRIBE_SINCE
            else ErrorCode.none
        )
        return DescribedGroup(group_id, error, str(DEAD), "", "")
    stable = group.is_in(STABLE)
    members = tuple(
        DescribedMember(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            metadata=member.metadata(group.protocol_name) if stable else b"",
            assignment=member.assignment if stable else b"",
        )
        for member in group.members.values()
    )
    return DescribedGroup(
        group_id,
        ErrorCode.none,
        str(group.state),
        group.protocol_type or "",
        (group.protocol_name or "") if stable else "",
        members,
    )


def list_groups(groups: Collection[ClassicGroup], states_filter: Collection[str] | None) -> list[ListedGroup]:
    wanted = {state.lower() for state in states_filter or ()}
    return [
        ListedGroup(group.group_id, group.protocol_type or "", str(group.state))
        for group in groups
        if not wanted or str(group.state).lower() in wanted
    ]


def validate_delete(group: ClassicGroup | None) -> None:
    if group is None or group.is_in(DEAD):
        raise KafkaError(ErrorCode.group_id_not_found)
    if group.is_in(STABLE, PREPARING, COMPLETING):
        raise KafkaError(ErrorCode.non_empty_group)


def validate_offset_delete(group: ClassicGroup | None) -> None:
    """OffsetDelete: missing/Dead ⇒ GROUP_ID_NOT_FOUND; an active non-``consumer`` group ⇒ NON_EMPTY_GROUP."""
    if group is None or group.is_in(DEAD):
        raise KafkaError(ErrorCode.group_id_not_found)
    if group.is_in(STABLE, PREPARING, COMPLETING) and not group.uses_consumer_protocol:
        raise KafkaError(ErrorCode.non_empty_group)


def validate_existing_group_commit(
    group: ClassicGroup,
    member_id: str,
    group_instance_id: str | None,
    generation_id: int,
    is_transactional: bool,
) -> None:
    """Steps 2-6 of the commit checks, for a group that exists (its state read once: every commit
    runs this)."""
    state = group.state
    if state == DEAD:
        raise KafkaError(ErrorCode.coordinator_not_available)
    if generation_id < 0 and state == EMPTY:
        return
    if generation_id >= 0 or member_id or group_instance_id is not None:
        group.validate_member(member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise KafkaError(ErrorCode.illegal_generation)
    elif not is_transactional and state != EMPTY:
        raise KafkaError(ErrorCode.unknown_member_id)
    if not is_transactional and state == COMPLETING:
        raise KafkaError(ErrorCode.rebalance_in_progress)
