"""Share groups of one offsets-log partition: ShareGroupHeartbeat, session timeouts, describe, list, delete.

After Kafka's ``GroupMetadataManager.shareGroupHeartbeat`` (KIP-932, ShareGroupHeartbeat v1):

1. A member joins with epoch 0 and its own member id (v1 clients make it up; empty is
   INVALID_REQUEST), naming the topics it subscribes to. It leaves with epoch -1. Any other epoch
   must be the member's current one (or the one before, if the bump never reached it), else
   FENCED_MEMBER_EPOCH; an unknown member is UNKNOWN_MEMBER_ID.
2. A new member, a leave or a subscription change bumps the group epoch. When the group epoch is
   ahead of the target assignment's, the share assignor computes a new target for every member.
3. A member has nothing to revoke, so it takes its target (and the target's epoch) at once.
   The response carries the assignment when it changed or the member just joined.
4. Each heartbeat moves the member's session deadline; when it passes the member is removed.

Every change is records first: an operation makes its records, replays them (the code a load
runs) and returns them with its response. Nothing is kept for a caller to collect.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.share import initialization
from kcoord.coordinator.share.assignor import SIMPLE_ASSIGNOR, assign_share_partitions
from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.group import ShareGroup
from kcoord.coordinator.share.group_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupRecord,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)
from kcoord.coordinator.share.messages import (
    DescribedMember,
    DescribedShareGroup,
    ShareGroupChange,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
)
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.timer.api import Timer

__all__ = [
    "SHARE_PROTOCOL_TYPE",
    "DescribedShareGroup",
    "ShareGroupManager",
    "ShareHeartbeatRequest",
    "ShareHeartbeatResponse",
]

SHARE_PROTOCOL_TYPE = "share"
LEAVE_EPOCH = -1
_SESSION_PREFIX = "share:session:"

TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]
"""A topic's (id, partition count) by name, None when it does not exist."""


def session_key(group_id: str, member_id: str) -> str:
    return f"{_SESSION_PREFIX}{len(group_id)}:{group_id}:{member_id}"


def _parse_session_key(key: str) -> tuple[str, str] | None:
    if not key.startswith(_SESSION_PREFIX):
        return None
    length, _, rest = key[len(_SESSION_PREFIX) :].partition(":")
    if not length.isdigit() or len(rest) <= int(length) or rest[int(length)] != ":":
        return None
    return rest[: int(length)], rest[int(length) + 1 :]


class ShareGroupManager:
    """The share groups whose records live on one ``__consumer_offsets`` partition."""

    def __init__(self, config: ShareGroupConfig, timer: Timer, topics: TopicLookup) -> None:
        self.config = config
        self._timer = timer
        self._topics = topics
        self._groups: dict[str, ShareGroup] = {}

    def has_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def group(self, group_id: str) -> ShareGroup | None:
        return self._groups.get(group_id)

    # -- records

    def replay(self, record: ShareGroupRecord) -> None:
        """One share group record, live or at load; the metadata tombstone removes the group."""
        key = record.key
        if isinstance(key, ShareGroupMetadataKey) and record.value is None:
            self._groups.pop(key.group, None)
            return
        group = self._groups.get(key.group)
        if group is None:
            if record.value is None:
                return
            group = self._groups[key.group] = ShareGroup(key.group)
        group.replay(key, record.value)

    def _apply(self, records: list[ShareGroupRecord]) -> list[ShareGroupRecord]:
        for record in records:
            self.replay(record)
        return records

    # -- ShareGroupHeartbeat

    def heartbeat(self, sink: Any, request: ShareHeartbeatRequest, now_ms: int) -> ShareGroupChange:
        """One ShareGroupHeartbeat; raises KafkaError (nothing changed) when it is refused. The change
        names the share partitions whose state the share coordinator must initialise."""
        _validate(request)
        group = self._groups.get(request.group_id)
        if request.member_epoch == LEAVE_EPOCH:
            result = self._leave(request.group_id, request.member_id)
            result.respond(sink, ShareHeartbeatResponse(request.member_id, LEAVE_EPOCH, 0, None))
            return result
        member = None if group is None else group.members.get(request.member_id)
        if request.member_epoch > 0:
            if member is None:
                raise KafkaError(
                    ErrorCode.unknown_member_id, f"{request.member_id} is not in {request.group_id}"
                )
            if request.member_epoch not in (member.member_epoch, member.previous_member_epoch):
                raise KafkaError(
                    ErrorCode.fenced_member_epoch, f"epoch {request.member_epoch} != {member.member_epoch}"
                )
        elif member is None and group is not None and len(group.members) >= self.config.max_size:
            raise KafkaError(
                ErrorCode.group_max_size_reached, f"{request.group_id} has {self.config.max_size} members"
            )
        records: list[ShareGroupRecord] = []
        if group is None:
            records += self._apply([_metadata(request.group_id, 0)])
            group = self._groups[request.group_id]
        names = request.subscribed_topic_names
        resubscribed = member is None or (
            names is not None and set(names) != set(member.subscribed_topic_names)
        )
        records += self._apply(self._member_changes(group, request))
        records += self._apply(self._epoch_change(group, resubscribed))
        records += self._apply(self._target_changes(group))
        current = group.members[request.member_id]
        previous_assignment = current.assigned
        records += self._apply(self._reconcile(group, request.member_id))
        state, to_initialize = initialization.to_initialize(
            group, self._subscribed_topics(group), now_ms, self.config.initialize_retry_interval_ms
        )
        records += self._apply([state] if state is not None else [])
        self._timer.schedule(
            session_key(group.group_id, request.member_id), now_ms + self.config.session_timeout_ms
        )
        changed = request.member_epoch == 0 or current.assigned != previous_assignment
        result = ShareGroupChange.of_records(records)
        result.state_epoch, result.initialize = group.epoch, to_initialize
        response = ShareHeartbeatResponse(
            request.member_id,
            current.member_epoch,
            self.config.heartbeat_interval_ms,
            current.assigned if changed else None,
        )
        result.respond(sink, response)
        return result

    def _member_changes(self, group: ShareGroup, request: ShareHeartbeatRequest) -> list[ShareGroupRecord]:
        member = group.members.get(request.member_id)
        names = request.subscribed_topic_names
        if names is None:
            names = () if member is None else member.subscribed_topic_names
        value = ShareGroupMemberMetadataValue(request.rack_id, request.client_id, request.client_host, names)
        known = None
        if member is not None:
            known = ShareGroupMemberMetadataValue(
                member.rack_id, member.client_id, member.client_host, member.subscribed_topic_names
            )
        if value == known:
            return []
        return [ShareGroupRecord(ShareGroupMemberMetadataKey(group.group_id, request.member_id), value)]

    def _epoch_change(self, group: ShareGroup, resubscribed: bool) -> list[ShareGroupRecord]:
        """A new group epoch when a member joined or changed its subscription, or when the subscribed
        topics changed (their hash differs from the recorded one, a change that may predate a restart)."""
        hash_now = topics_hash(self._subscribed_topics(group))
        if not resubscribed and hash_now == group.metadata_hash:
            return []
        return [_metadata(group.group_id, group.epoch + 1, hash_now)]

    def _subscribed_topics(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        found: dict[str, tuple[uuid.UUID, int]] = {}
        for name in sorted({n for m in group.members.values() for n in m.subscribed_topic_names}):
            topic = self._topics(name)
            if topic is not None:
                found[name] = topic
        return found

    def _target_changes(self, group: ShareGroup) -> list[ShareGroupRecord]:
        """A new target when the group epoch moved past the target's."""
        epoch = group.epoch
        if epoch <= group.assignment_epoch:
            return []
        topics = self._subscribed_topics(group)
        records: list[ShareGroupRecord] = []
        subscriptions = {m.member_id: m.subscribed_topic_names for m in group.members.values()}
        for member_id, target in assign_share_partitions(subscriptions, topics).items():
            if group.targets.get(member_id) != target:
                key = ShareGroupTargetAssignmentMemberKey(group.group_id, member_id)
                records.append(ShareGroupRecord(key, ShareGroupTargetAssignmentMemberValue(target)))
        metadata = ShareGroupTargetAssignmentMetadataKey(group.group_id)
        records.append(ShareGroupRecord(metadata, ShareGroupTargetAssignmentMetadataValue(epoch)))
        return records

    def _reconcile(self, group: ShareGroup, member_id: str) -> list[ShareGroupRecord]:
        member = group.members[member_id]
        if member.member_epoch == group.assignment_epoch:
            return []
        value = ShareGroupCurrentMemberAssignmentValue(
            group.assignment_epoch, member.member_epoch, 0, group.targets.get(member_id, ())
        )
        return [ShareGroupRecord(ShareGroupCurrentMemberAssignmentKey(group.group_id, member_id), value)]

    def _leave(self, group_id: str, member_id: str) -> ShareGroupChange:
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            raise KafkaError(ErrorCode.unknown_member_id, f"{member_id} is not in {group_id}")
        self._timer.cancel(session_key(group_id, member_id))
        records = self._apply(
            [
                ShareGroupRecord(ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
                ShareGroupRecord(ShareGroupTargetAssignmentMemberKey(group_id, member_id), None),
                ShareGroupRecord(ShareGroupMemberMetadataKey(group_id, member_id), None),
            ]
        )
        hash_now = topics_hash(self._subscribed_topics(group))
        records += self._apply([_metadata(group_id, group.epoch + 1, hash_now)])
        return ShareGroupChange.of_records(records)

    # -- timers and loading

    def on_timer(self, key: str, now_ms: int) -> CoordinatorResult | None:
        """A session deadline passed: the member is removed. None: not a share group timer."""
        target = _parse_session_key(key)
        if target is None:
            return None
        group = self._groups.get(target[0])
        if group is None or target[1] not in group.members:
            return CoordinatorResult()
        return self._leave(*target)

    def on_loaded(self, now_ms: int) -> None:
        """Every loaded member gets a full session to heartbeat again."""
        for group in self._groups.values():
            for member_id in group.members:
                self._timer.schedule(
                    session_key(group.group_id, member_id), now_ms + self.config.session_timeout_ms
                )

    # -- admin

    def describe(self, group_ids: Iterable[str]) -> list[DescribedShareGroup]:
        described = []
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if group is None:
                described.append(DescribedShareGroup(group_id, ErrorCode.group_id_not_found, "Dead"))
                continue
            members = tuple(
                DescribedMember(
                    m.member_id,
                    m.rack_id,
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    m.subscribed_topic_names,
                    m.assigned,
                )
                for m in sorted(group.members.values(), key=lambda m: m.member_id)
            )
            described.append(
                DescribedShareGroup(
                    group_id,
                    ErrorCode.none,
                    group.state,
                    group.epoch,
                    group.assignment_epoch,
                    SIMPLE_ASSIGNOR,
                    members,
                )
            )
        return described

    def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str, str]]:
        """ListGroups: (group id, protocol type "share", state) of each group, of the asked states."""
        wanted = {s.lower() for s in states}
        return [
            (group_id, SHARE_PROTOCOL_TYPE, group.state)
            for group_id, group in sorted(self._groups.items())
            if not wanted or group.state.lower() in wanted
        ]

    def initialized(self, group_id: str, done: dict[uuid.UUID, tuple[int, ...]]) -> ShareGroupChange:
        """The share coordinator initialised the state of ``done``: recorded as initialized."""
        group = self._groups.get(group_id)
        record = None if group is None else initialization.mark_initialized(group, done)
        return ShareGroupChange.of_records(self._apply([record] if record is not None else []))

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, tuple[int, ...]]:
        """The share partitions of the group that have state (DescribeShareGroupOffsets, Alter...)."""
        group = self._groups.get(group_id)
        if group is None or group.state_metadata is None:
            return {}
        return initialization.partitions(group.state_metadata.initialized_topics)

    def delete_offsets(self, group_id: str, topics: dict[uuid.UUID, tuple[str, int]]) -> ShareGroupChange:
        """DeleteShareGroupOffsets: the topics' share state is to be deleted (GROUP_ID_NOT_FOUND for no
        such group, NON_EMPTY_GROUP while it has members)."""
        group = self._empty_group(group_id)
        record, delete = initialization.mark_deleting(group, topics)
        result = ShareGroupChange.of_records(self._apply([record] if record is not None else []))
        result.delete = delete
        return result

    def deleted(self, group_id: str, topic_ids: list[uuid.UUID]) -> ShareGroupChange:
        """The share coordinator deleted the topics' state: they leave the deleting set."""
        group = self._groups.get(group_id)
        record = None if group is None else initialization.complete_deleting(group, topic_ids)
        return ShareGroupChange.of_records(self._apply([record] if record is not None else []))

    def _empty_group(self, group_id: str) -> ShareGroup:
        group = self._groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.group_id_not_found, f"{group_id} is not a share group")
        if group.members:
            raise KafkaError(ErrorCode.non_empty_group, f"{group_id} has members")
        return group

    def delete_group(self, group_id: str) -> ShareGroupChange:
        """DeleteGroups: GROUP_NOT_EMPTY while members remain, else every record of the group tombstoned;
        the change names all of the group's share state, for the share coordinator to delete."""
        group = self._empty_group(group_id)
        _, delete = initialization.mark_deleting(group, None)
        records = [
            ShareGroupRecord(ShareGroupTargetAssignmentMemberKey(group_id, m), None)
            for m in sorted(group.targets)
        ]
        records += [
            ShareGroupRecord(ShareGroupTargetAssignmentMetadataKey(group_id), None),
            ShareGroupRecord(ShareGroupStatePartitionMetadataKey(group_id), None),
            ShareGroupRecord(ShareGroupMetadataKey(group_id), None),
        ]
        result = ShareGroupChange.of_records(self._apply(records))
        result.delete = delete
        return result


def _metadata(group_id: str, epoch: int, metadata_hash: int = 0) -> ShareGroupRecord:
    return ShareGroupRecord(ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(epoch, metadata_hash))


def topics_hash(topics: dict[str, tuple[uuid.UUID, int]]) -> int:
    """A signed 64-bit hash of the subscribed topics (name, id, partition count), stable across restarts."""
    text = ";".join(f"{name}:{topic_id}:{count}" for name, (topic_id, count) in sorted(topics.items()))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)


def _validate(request: ShareHeartbeatRequest) -> None:
    if not request.group_id:
        raise KafkaError(ErrorCode.invalid_request, "GroupId can't be empty.")
    if not request.member_id:
        raise KafkaError(ErrorCode.invalid_request, "MemberId can't be empty.")
    if request.member_epoch < LEAVE_EPOCH:
        raise KafkaError(ErrorCode.invalid_request, f"MemberEpoch {request.member_epoch} is invalid.")
    if request.member_epoch == 0 and not request.subscribed_topic_names:
        raise KafkaError(ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request.")
