"""One partition of ``__consumer_offsets``: its classic, consumer and share groups and committed offsets.

The shard is pure: every method takes the time and returns a :class:`CoordinatorResult`. It
routes records to the state machine they belong to: offset records are applied once durable
(``on_appended``) or while loading (``replay``); group records are only applied while loading,
because the classic groups change their in-memory state as they go, as in Kafka.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import Any

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.history import ClassicGroupObserver, RebalanceRecord, conversion_events
from kcoord.coordinator.classic.manager import ClassicGroupManager
from kcoord.coordinator.classic.messages import (
    DeleteGroupResult,
    DescribedGroup,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListedGroup,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kcoord.coordinator.classic.state import ClassicGroupState
from kcoord.coordinator.consumer.change import ConsumerGroupChange
from kcoord.coordinator.consumer.classic_members import ClassicMemberRequests
from kcoord.coordinator.consumer.config import ConsumerGroupConfig, PartitionCount
from kcoord.coordinator.consumer.group_configs import GroupConfigOverrides
from kcoord.coordinator.consumer.manager import CONSUMER_PROTOCOL_TYPE, ConsumerGroupManager
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest, DescribedConsumerGroup
from kcoord.coordinator.consumer.persistence import TopicIds
from kcoord.coordinator.consumer.regex_subscriptions import RegexJob
from kcoord.coordinator.group_routing import (
    ClassicKind,
    ConsumerKind,
    GroupKinds,
    GroupsView,
    classic_request_error,
)
from kcoord.coordinator.migration import (
    MigrationError,
    classic_group_from_consumer,
    consumer_group_from_classic,
)
from kcoord.coordinator.offsets import (
    CommittedOffset,
    OffsetCommitRequest,
    OffsetDeleteTopic,
    OffsetFetchResponse,
    OffsetFetchTopic,
    OffsetManager,
)
from kcoord.coordinator.records import CONSUMER_GROUP_KEYS, CoordinatorRecord, OffsetCommitKey
from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.group_records import ShareGroupRecord
from kcoord.coordinator.share.kind import ShareKind
from kcoord.coordinator.share.manager import ShareGroupManager
from kcoord.coordinator.share.messages import DescribedShareGroup, ShareGroupChange, ShareHeartbeatRequest
from kcoord.coordinator.txn_offset_commit import TxnOffsetCommitRequest, commit_transactional
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.timer.api import Timer

TopicExists = Callable[[str, int], bool]
PastRebalances = Callable[[str], list[RebalanceRecord]]
"""``group id -> its rebalances from before the partition was loaded`` (kept by the shell)."""


def _no_topics(topic: str) -> int | None:
    return None


class GroupCoordinatorShard:
    def __init__(
        self,
        timer: Timer,
        *,
        classic_config: ClassicGroupConfig,
        offset_metadata_max_bytes: int,
        offsets_retention_ms: int,
        topic_exists: TopicExists,
        observer: ClassicGroupObserver | None = None,
        consumer_config: ConsumerGroupConfig | None = None,
        partition_count: PartitionCount | None = None,
        topic_ids: TopicIds | None = None,
        topic_names: Callable[[], Iterable[str]] = tuple,
        past_rebalances: PastRebalances | None = None,
        group_overrides: GroupConfigOverrides | None = None,
        share_config: ShareGroupConfig | None = None,
    ) -> None:
        self.classic = ClassicGroupManager(timer, classic_config, observer)
        self.consumer = ConsumerGroupManager(
            timer,
            consumer_config or ConsumerGroupConfig(),
            partition_count or _no_topics,
            topic_ids=topic_ids,
            topic_names=topic_names,
            overrides=group_overrides,
        )
        self._classic_members = ClassicMemberRequests(self.consumer)
        self._topic_ids = topic_ids
        self._partition_count = partition_count or _no_topics
        self.share = ShareGroupManager(share_config or ShareGroupConfig(), timer, self._share_topic)
        self._share_kind = ShareKind(self.share)
        self._kinds = GroupKinds(
            ConsumerKind(self.consumer, self._classic_members),
            self._share_kind,
            default=ClassicKind(self.classic),
        )
        self._groups = GroupsView(self._kinds)
        self._conversions = conversion_events(observer)
        self._past_rebalances = past_rebalances
        self.offsets = OffsetManager(offset_metadata_max_bytes)
        self._offsets_retention_ms = offsets_retention_ms
        self._topic_exists = topic_exists

    # -- the runtime's contract

    def replay(
        self, record: CoordinatorRecord, offset: int = -1, producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        """One record of the log. An offset commit of a producer's batch (TxnOffsetCommit) is pending
        until that producer's marker; where a record sits does not matter to groups."""
        if isinstance(record.key, OffsetCommitKey):
            if producer_id >= 0:
                self.offsets.replay_transactional(record, producer_id, producer_epoch)
            else:
                self.offsets.replay(record)
        elif isinstance(record, ShareGroupRecord):
            self.share.replay(record)
        elif isinstance(record.key, CONSUMER_GROUP_KEYS):
            self.consumer.replay(record.key, record.value)
        else:
            self.classic.replay(record)

    def replay_end_transaction_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """The producer's transaction ended: its pending offsets are committed, or dropped on an abort."""
        self.offsets.end_transaction(producer_id, committed, producer_epoch)

    def replay_offset(
        self, group: str, topic: str, partition: int, committed: CommittedOffset | None
    ) -> None:
        """Loading's fast path for an offset commit: the same state change as :meth:`replay` of its record."""
        self.offsets.replay_offset(group, topic, partition, committed)

    def on_appended(self, records: list[CoordinatorRecord]) -> None:
        self.offsets.on_appended(records)

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        for group_id in sorted({*self.offsets.all_groups_with_offsets(), *self.offsets.pending.groups()}):
            if not self._kinds.exists(group_id):
                self.classic.ensure_simple_group(group_id, now_ms)
        if self._past_rebalances is not None:
            self.classic.restore_history(self._past_rebalances)
        self.consumer.on_loaded(now_ms)
        self.share.on_loaded(now_ms)
        return self.classic.on_loaded(now_ms)

    def on_timer(self, key: str, now_ms: int) -> CoordinatorResult:
        share_change = self.share.on_timer(key, now_ms)
        if share_change is not None:
            return share_change
        change = self.consumer.on_timer(key, now_ms)
        if change is not None:
            self._downgrade_where_due(change, now_ms)
            return change
        return self.classic.on_timer(key, now_ms)

    def unload(self) -> CoordinatorResult:
        self.consumer.unload()
        return self.classic.unload()

    # -- group membership

    def _serves_classic_members(self, group_id: str) -> bool:
        """A consumer group answers classic requests unless the migration policy is disabled."""
        return self.consumer.has_group(group_id) and self.consumer.config.migration_enabled

    def join_group(
        self, request: JoinGroupRequest, sink: Any, now_ms: int, connection_id: int | None = None
    ) -> CoordinatorResult:
        result = CoordinatorResult()
        if self.share.has_group(request.group_id):
            raise KafkaError(
                ErrorCode.inconsistent_group_protocol, f"Group {request.group_id} is a share group."
            )
        if self._serves_classic_members(request.group_id):
            if self.consumer.groups[request.group_id].members:
                change = self._classic_members.join(request, sink, now_ms)
                self._downgrade_where_due(change, now_ms)
                return change
            # An Empty consumer group becomes a classic group again on a classic join (as Kafka).
            result.extend(self.consumer.release(request.group_id))
        classic_request_error(self.consumer, request.group_id, join=True)
        result.extend(self.classic.join_group(request, sink, now_ms))
        if connection_id is not None and request.member_id:
            self.classic.note_member_connection(
                request.group_id, request.member_id, connection_id, now_ms, heartbeat=False
            )
        return result

    def sync_group(
        self, request: SyncGroupRequest, sink: Any, now_ms: int, connection_id: int | None = None
    ) -> CoordinatorResult:
        if self._serves_classic_members(request.group_id):
            try:
                synced = self._classic_members.sync(request, now_ms)
            except KafkaError as exc:
                synced = SyncGroupResponse(exc.code)
            result = CoordinatorResult()
            result.respond(sink, synced)
            return result
        classic_request_error(self.consumer, request.group_id, join=False)
        if connection_id is not None:
            self.classic.note_member_connection(
                request.group_id, request.member_id, connection_id, now_ms, heartbeat=False
            )
        return self.classic.sync_group(request, sink, now_ms)

    def heartbeat_code(self, request: HeartbeatRequest, now_ms: int, connection_id: int) -> ErrorCode:
        """The heartbeat's answer, computed without a result object (see the classic manager)."""
        return self._kinds.kind_of(request.group_id).heartbeat_code(request, now_ms, connection_id)

    def member_disconnected(
        self, group_id: str, member_id: str, connection_id: int, now_ms: int
    ) -> CoordinatorResult:
        return self._kinds.kind_of(group_id).member_disconnected(group_id, member_id, connection_id, now_ms)

    def on_partitions_added(self, topic: str, now_ms: int) -> CoordinatorResult:
        consumer = self.consumer.on_topics_changed(topic, now_ms)
        result = self.classic.on_partitions_added(topic, now_ms)
        result.records.extend(consumer.records)
        return result

    def on_topic_changed(self, topic: str, now_ms: int) -> CoordinatorResult:
        """A topic was created or deleted: consumer groups subscribed to it get a new epoch at once."""
        return self.consumer.on_topics_changed(topic, now_ms)

    def regex_jobs(self) -> list[RegexJob]:
        """Regex matches too long for the coordinator's turn, for the runtime to run elsewhere."""
        return self.consumer.regexes.take_jobs()

    def on_regex_matched(self, job: RegexJob, names: frozenset[str], now_ms: int) -> CoordinatorResult:
        return self.consumer.on_regex_matched(job, names, now_ms)

    def on_regex_abandoned(self, job: RegexJob, now_ms: int) -> CoordinatorResult:
        self.consumer.regexes.abandoned(job)
        return ConsumerGroupChange()

    def leave_group(self, request: LeaveGroupRequest, sink: Any, now_ms: int) -> CoordinatorResult:
        if self._serves_classic_members(request.group_id):
            change = self._classic_members.leave(request, sink, now_ms)
            self._downgrade_where_due(change, now_ms)
            return change
        classic_request_error(self.consumer, request.group_id, join=False)
        return self.classic.leave_group(request, sink, now_ms)

    # -- consumer groups (KIP-848)

    def consumer_heartbeat(
        self, request: ConsumerHeartbeatRequest, sink: Any, now_ms: int, connection_id: int | None = None
    ) -> CoordinatorResult:
        """A classic group of that id is upgraded when the heartbeat joins and the migration policy
        allows it; else the heartbeat is refused (GROUP_ID_NOT_FOUND, as Kafka). A member leaving
        may downgrade the group (:meth:`_downgrade_where_due`)."""
        result = CoordinatorResult()
        self.consumer.validate(request)
        if self.share.has_group(request.group_id):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {request.group_id} is a share group.")
        if self.classic.has_group(request.group_id):
            self._upgrade(request, result, now_ms)
        change = self.consumer.heartbeat(request, sink, now_ms, connection_id)
        result.records.extend(change.records)
        self._downgrade_where_due(change, now_ms, into=result)
        result.responses.extend(change.responses)
        return result

    def _upgrade(self, request: ConsumerHeartbeatRequest, result: CoordinatorResult, now_ms: int) -> None:
        """Kafka's ``validateOnlineUpgrade`` and ``convertToConsumerGroup``: an Empty group is
        simply replaced; a live one of the consumer protocol is converted with its members."""
        group_id = request.group_id
        group = self.classic.group(group_id)
        refused = KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        if group is None or request.member_epoch != 0 or not self.consumer.config.upgrades_classic_groups:
            raise refused
        if group.state is ClassicGroupState.EMPTY:
            result.records.extend(self.classic.delete_group(group_id))
            return
        if not group.uses_consumer_protocol or len(group.members) > self.consumer.config.max_size:
            raise refused
        try:
            converted = consumer_group_from_classic(group, self.consumer.partition_count)
        except MigrationError:
            raise refused from None
        self._conversions.on_group_converted(group_id, "consumer", group.generation_id, len(group.members))
        result.extend(self.classic.release_for_upgrade(group_id, now_ms))
        result.extend(self.consumer.adopt(converted, now_ms))

    def _downgrade_where_due(
        self, change: ConsumerGroupChange, now_ms: int, into: CoordinatorResult | None = None
    ) -> None:
        """Kafka's ``validateOnlineDowngrade`` and ``convertToClassicGroup`` for every group whose
        last consumer-protocol member just left in ``change`` while classic members remain; the
        conversion's records go after the change's (into ``into``, else ``change`` itself)."""
        result = change if into is None else into
        for group_id, generation in change.downgrades.items():
            group = self.consumer.groups.get(group_id)
            if group is None or len(group.members) > self.classic.config.max_size:
                continue
            try:
                converted = classic_group_from_consumer(group, generation, now_ms)
            except MigrationError:
                continue
            self._conversions.on_group_converted(group_id, "classic", generation, len(group.members))
            result.extend(self.consumer.release(group_id))
            result.extend(self.classic.adopt_downgraded(converted, now_ms))

    def describe_consumer_group(self, group_id: str) -> DescribedConsumerGroup | None:
        return self.consumer.describe(group_id)

    # -- share groups (KIP-932)

    def share_heartbeat(self, request: ShareHeartbeatRequest, sink: Any, now_ms: int) -> ShareGroupChange:
        """A group of that id that is not a share group refuses it: GROUP_ID_NOT_FOUND, as Kafka."""
        if self.consumer.has_group(request.group_id) or self.classic.has_group(request.group_id):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {request.group_id} is not a share group.")
        return self.share.heartbeat(sink, request, now_ms)

    def share_partition_initialized(
        self, group_id: str, topic_id: uuid.UUID, partition: int
    ) -> CoordinatorResult:
        """The share partition has durable state now: the group records it as initialized."""
        return self.share.initialized(group_id, {topic_id: (partition,)})

    def describe_share_groups(self, group_ids: list[str]) -> list[DescribedShareGroup]:
        """ShareGroupDescribe; a group of another kind is GROUP_ID_NOT_FOUND, as a missing one (Kafka)."""
        return self.share.describe(group_ids)

    def _share_topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        count = self._partition_count(name)
        topic_id = None if self._topic_ids is None else self._topic_ids.id_of(name)
        return None if count is None or topic_id is None else (topic_id, count)

    def is_classic_group(self, group_id: str) -> bool:
        return self.classic.has_group(group_id)

    # -- offsets

    def commit_offsets(self, request: OffsetCommitRequest, sink: Any, now_ms: int) -> CoordinatorResult:
        return self.offsets.commit(request, sink, now_ms, self._groups, self._topic_exists)

    def commit_transactional_offsets(
        self, request: TxnOffsetCommitRequest, sink: Any, now_ms: int
    ) -> CoordinatorResult:
        """TxnOffsetCommit: records the runtime writes as a transactional batch of the request's producer."""
        return commit_transactional(
            self.offsets,
            request,
            sink,
            now_ms,
            self._groups,
            self._topic_exists,
        )

    def delete_offsets(
        self, group_id: str, topics: list[OffsetDeleteTopic], sink: Any, now_ms: int
    ) -> CoordinatorResult:
        return self.offsets.delete_offsets(group_id, topics, sink, self._groups)

    def fetch_offsets(
        self,
        group_id: str,
        topics: list[OffsetFetchTopic] | None,
        require_stable: bool,
        member: tuple[str | None, int] = (None, -1),
    ) -> OffsetFetchResponse:
        """A read: the group's committed offsets (``topics`` None: every partition it committed).

        ``member`` is OffsetFetch v9's (member id, member epoch), checked for consumer groups."""
        self.consumer.validate_offset_fetch(group_id, *member)
        return self.offsets.fetch(group_id, topics, require_stable)

    def expire_offsets(self, now_ms: int) -> CoordinatorResult:
        """Tombstone expired offsets, and an Empty group whose offsets all expire with them."""
        records = self.offsets.expire(now_ms, self._offsets_retention_ms, self._groups)
        expiring = Counter(r.key.group for r in records if isinstance(r.key, OffsetCommitKey))
        for group_id, count in expiring.items():
            held = self.offsets.pending.has_group(group_id)  # open transactions keep the group (Kafka)
            if count >= len(self.offsets.group_offsets(group_id)) and not held:
                records.extend(self.classic.maybe_delete_empty_group(group_id))
        return CoordinatorResult(records=records)

    # -- admin

    def list_groups(self, states_filter: Collection[str] | None) -> list[ListedGroup]:
        consumer = [
            ListedGroup(group_id, CONSUMER_PROTOCOL_TYPE, state, group_type="consumer")
            for group_id, state in self.consumer.listed(states_filter)
        ]
        share = self._share_kind.listed_groups(tuple(states_filter or ()))
        return self.classic.list_groups(states_filter) + consumer + share

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        return self._kinds.kind_of(group_id).describe_group(group_id, api_version)

    def delete_groups(self, group_ids: list[str], sink: Any, now_ms: int) -> CoordinatorResult:
        """Kafka's record order per group: its offsets' tombstones, then the group's."""
        result = CoordinatorResult()
        answers: list[DeleteGroupResult] = []
        for group_id in group_ids:
            try:
                deleted = self._kinds.kind_of(group_id).delete_group(group_id)
            except KafkaError as exc:
                answers.append(DeleteGroupResult(group_id, exc.code))
                continue
            result.records.extend(self.offsets.delete_group_offsets(group_id))
            result.extend(deleted)
            answers.append(DeleteGroupResult(group_id, ErrorCode.none))
        result.respond(sink, answers)
        return result
