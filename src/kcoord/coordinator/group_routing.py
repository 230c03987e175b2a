"""Classic, consumer and share groups share one group id namespace; this is what routes between them.

Each kind of group is a :class:`GroupKind`; :class:`GroupKinds` holds them in order and answers
which kind a group id belongs to (the first that has it, else the classic kind, which creates groups
on a JoinGroup or an offset commit). Everything that only needs "the group's kind" goes through it:
the offsets' view of a group (:class:`GroupsView`), classic heartbeats, disconnect hints,
DescribeGroups and DeleteGroups. Adding a kind is one more :class:`GroupKind` in the list, as share
groups are (:class:`~kcoord.coordinator.share.kind.ShareKind`). The online migration between the
classic and consumer kinds (:mod:`kcoord.coordinator.migration`) stays explicit in the shard: it
is about those two kinds in particular.
"""

from __future__ import annotations

from typing import Protocol

from kcoord.coordinator.classic import admin
from kcoord.coordinator.classic.manager import ClassicGroupManager
from kcoord.coordinator.classic.messages import DescribedGroup, HeartbeatRequest
from kcoord.coordinator.consumer.classic_members import ClassicMemberRequests
from kcoord.coordinator.consumer.manager import CONSUMER_PROTOCOL_TYPE, ConsumerGroupManager
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import ErrorCode, KafkaError

TXN_COMMIT_AS_VERSION = 0
"""The OffsetCommit version whose rules TxnOffsetCommit follows: a missing group or a stale epoch
is ILLEGAL_GENERATION (never v9's GROUP_ID_NOT_FOUND or STALE_MEMBER_EPOCH), as in Kafka."""


class GroupKind(Protocol):
    """One kind of group as the shard and the offsets see it, whatever protocol its members speak."""

    def has_group(self, group_id: str) -> bool: ...

    def validate_offset_commit(
        self, group_id: str, member_id: str, instance: str | None, epoch: int, version: int, now_ms: int
    ) -> None: ...

    def validate_transactional_commit(
        self, group_id: str, member_id: str, instance: str | None, generation: int, now_ms: int
    ) -> None:
        """TxnOffsetCommit's KIP-447 checks (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION)."""

    def group_state(self, group_id: str) -> str | None: ...

    def protocol_type(self, group_id: str) -> str | None: ...

    def is_subscribed(self, group_id: str, topic: str) -> bool: ...

    def empty_since_ms(self, group_id: str) -> int | None:
        """Since when the group is Empty (offsets expire from then), None when it is not."""

    def is_simple_or_missing(self, group_id: str) -> bool: ...

    def heartbeat_code(self, request: HeartbeatRequest, now_ms: int, connection_id: int) -> ErrorCode:
        """A classic Heartbeat to a group of this kind."""

    def member_disconnected(
        self, group_id: str, member_id: str, connection_id: int, now_ms: int
    ) -> CoordinatorResult: ...

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        """DescribeGroups' answer for a group of this kind."""

    def delete_group(self, group_id: str) -> CoordinatorResult:
        """DeleteGroups: the group's tombstones; raises KafkaError (nothing changed) when refused."""


class ClassicKind:
    """Classic groups (JoinGroup/SyncGroup), and simple groups that only commit offsets."""

    def __init__(self, classic: ClassicGroupManager) -> None:
        self._classic = classic
        self.has_group = classic.has_group
        self.validate_offset_commit = classic.validate_offset_commit
        self.protocol_type = classic.protocol_type
        self.is_subscribed = classic.is_subscribed
        self.empty_since_ms = classic.empty_since_ms
        self.is_simple_or_missing = classic.is_simple_or_missing
        self.heartbeat_code = classic.heartbeat_code
        self.member_disconnected = classic.member_disconnected

    def validate_transactional_commit(
        self, group_id: str, member_id: str, instance: str | None, generation: int, now_ms: int
    ) -> None:
        """A missing group is created as a simple group for generation -1, else ILLEGAL_GENERATION."""
        self._classic.validate_offset_commit(
            group_id, member_id, instance, generation, TXN_COMMIT_AS_VERSION, now_ms, is_transactional=True
        )

    def group_state(self, group_id: str) -> str | None:
        state = self._classic.group_state(group_id)
        return None if state is None else str(state)

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        return self._classic.describe_groups([group_id], api_version)[0]

    def delete_group(self, group_id: str) -> CoordinatorResult:
        self._classic.validate_delete_group(group_id)
        return CoordinatorResult(records=self._classic.delete_group(group_id))


class ConsumerKind:
    """Consumer groups (KIP-848), with the classic members a migrating group may keep."""

    def __init__(self, consumer: ConsumerGroupManager, classic_members: ClassicMemberRequests) -> None:
        self._consumer = consumer
        self._classic_members = classic_members
        self.has_group = consumer.has_group
        self.is_subscribed = consumer.is_subscribed

    def validate_offset_commit(
        self, group_id: str, member_id: str, instance: str | None, epoch: int, version: int, now_ms: int
    ) -> None:
        """A consumer group's commit: the member and its epoch (no instance id or time involved)."""
        self._consumer.validate_offset_commit(group_id, member_id, epoch, version)

    def validate_transactional_commit(
        self, group_id: str, member_id: str, instance: str | None, generation: int, now_ms: int
    ) -> None:
        """The member and its epoch; a wrong epoch is ILLEGAL_GENERATION (as OffsetCommit before v9)."""
        self._consumer.validate_offset_commit(group_id, member_id, generation, TXN_COMMIT_AS_VERSION)

    def group_state(self, group_id: str) -> str | None:
        described = self._consumer.describe(group_id)
        return None if described is None else described.state

    def protocol_type(self, group_id: str) -> str | None:
        return CONSUMER_PROTOCOL_TYPE

    def empty_since_ms(self, group_id: str) -> int | None:
        return None

    def is_simple_or_missing(self, group_id: str) -> bool:
        return False

    def heartbeat_code(self, request: HeartbeatRequest, now_ms: int, connection_id: int) -> ErrorCode:
        """A classic member's heartbeat, when the migration policy lets classic members in."""
        if self._consumer.config.migration_enabled:
            return self._classic_members.heartbeat_code(request, now_ms)
        return ErrorCode.unknown_member_id

    def member_disconnected(
        self, group_id: str, member_id: str, connection_id: int, now_ms: int
    ) -> CoordinatorResult:
        self._consumer.member_disconnected(group_id, member_id, connection_id, now_ms)
        return CoordinatorResult()

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        """A consumer group is "not a classic group": as a missing one (Dead; v6+ GROUP_ID_NOT_FOUND)."""
        return admin.describe(group_id, None, api_version)

    def delete_group(self, group_id: str) -> CoordinatorResult:
        return self._consumer.delete_group(group_id)


class GroupKinds:
    """The kinds of group of a shard: a group id belongs to the first of ``kinds`` that has it, else
    to ``default`` (the classic kind, asked last: the commit path pays one lookup per other kind)."""

    def __init__(self, *kinds: GroupKind, default: GroupKind) -> None:
        self._kinds = kinds
        self._default = default

    def kind_of(self, group_id: str) -> GroupKind:
        for kind in self._kinds:
            if kind.has_group(group_id):
                return kind
        return self._default

    def exists(self, group_id: str) -> bool:
        return self.kind_of(group_id).has_group(group_id)


class GroupsView:
    """The offsets' :class:`~kcoord.coordinator.offsets.GroupView` over every kind of group."""

    def __init__(self, kinds: GroupKinds) -> None:
        self._kinds = kinds

    def validate_offset_commit(
        self, group_id: str, member_id: str, instance: str | None, epoch: int, version: int, now_ms: int
    ) -> None:
        kind = self._kinds.kind_of(group_id)
        kind.validate_offset_commit(group_id, member_id, instance, epoch, version, now_ms)

    def validate_transactional_commit(
        self, group_id: str, member_id: str, instance: str | None, generation: int, now_ms: int
    ) -> None:
        kind = self._kinds.kind_of(group_id)
        kind.validate_transactional_commit(group_id, member_id, instance, generation, now_ms)

    def group_state(self, group_id: str) -> str | None:
        return self._kinds.kind_of(group_id).group_state(group_id)

    def protocol_type(self, group_id: str) -> str | None:
        return self._kinds.kind_of(group_id).protocol_type(group_id)

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        return self._kinds.kind_of(group_id).is_subscribed(group_id, topic)

    def empty_since_ms(self, group_id: str) -> int | None:
        return self._kinds.kind_of(group_id).empty_since_ms(group_id)

    def is_simple_or_missing(self, group_id: str) -> bool:
        return self._kinds.kind_of(group_id).is_simple_or_missing(group_id)


def classic_request_error(consumer: ConsumerGroupManager, group_id: str, join: bool) -> None:
    """A classic request to a consumer group: INCONSISTENT_GROUP_PROTOCOL (join), else UNKNOWN_MEMBER_ID."""
    if consumer.has_group(group_id):
        code = ErrorCode.inconsistent_group_protocol if join else ErrorCode.unknown_member_id
        raise KafkaError(code, f"Group {group_id} is a consumer group.")
