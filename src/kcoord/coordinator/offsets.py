"""Committed offsets of one offsets-log partition (a shard): commit, fetch, delete, expire.

Behaviour follows Kafka's ``OffsetMetadataManager`` (PROTOCOL.md §2.8-2.9). The manager is a
pure state machine in Kafka's model: **records are the truth**. ``commit``, ``delete_offsets``,
``delete_group_offsets`` and ``expire`` never change the in-memory offsets; they return
OffsetCommit records (a ``None`` value is a tombstone). The shell appends them to the offsets log
and then calls :meth:`OffsetManager.replay` once per appended record, which is also exactly what
loading the partition after a restart does. So a commit becomes visible to ``fetch`` only after
its records are durable and replayed, and the response is released at the same moment.

Group membership is not this module's business. Everything it needs to know about groups comes
through :class:`GroupView`, which the group state machines (classic, and later KIP-848) implement.

Transactional offsets (TxnOffsetCommit) are replayed into :class:`PendingOffsets` under their
producer id and become committed offsets at the producer's commit marker (dropped at an abort);
until then ``fetch`` does not see them and a ``require_stable`` fetch answers
UNSTABLE_OFFSET_COMMIT for their partitions. The plain commit path does no extra work for them.

The request and response shapes live in :mod:`kcoord.coordinator.offset_messages`; this module
re-exports those that other modules import from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar

from kcoord.coordinator.offset_expiry import (
    CONSUMER_PROTOCOL_TYPE,
    DEAD_STATE,
    EMPTY_STATE,
    NO_EXPIRE_TIMESTAMP,
    group_expiry_rule,
    is_offset_expired,
)
from kcoord.coordinator.offset_messages import (
    DEFAULT_RETENTION_TIME_MS,
    NO_LEADER_EPOCH,
    NO_OFFSET,
    OFFSET_METADATA_MAX_CHARS,
    CommittedOffset,
    GroupView,
    OffsetCommitPartition,
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetCommitTopicResult,
    OffsetDeletePartitionResult,
    OffsetDeleteResponse,
    OffsetDeleteTopic,
    OffsetDeleteTopicResult,
    OffsetFetchPartitionResult,
    OffsetFetchResponse,
    OffsetFetchTopic,
    OffsetFetchTopicResult,
    TopicExists,
    TopicPartition,
)
from kcoord.coordinator.pending_offsets import OpenTransaction, PendingOffsets, SettledTransaction
from kcoord.coordinator.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import ErrorCode, KafkaError

_P = ParamSpec("_P")

__all__ = [
    "DEFAULT_RETENTION_TIME_MS",
    "NO_LEADER_EPOCH",
    "CommittedOffset",
    "GroupView",
    "OffsetCommitPartition",
    "OffsetCommitPartitionResult",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetCommitTopic",
    "OffsetCommitTopicResult",
    "OffsetCommitTopics",
    "OffsetDeletePartitionResult",
    "OffsetDeleteResponse",
    "OffsetDeleteTopic",
    "OffsetDeleteTopicResult",
    "OffsetFetchPartitionResult",
    "OffsetFetchResponse",
    "OffsetFetchTopic",
    "OffsetFetchTopicResult",
    "OffsetManager",
    "error_code_of",
]


def _utf16_length(text: str) -> int:
    """Java's ``String.length()``: characters outside the BMP count twice."""
    return len(text.encode("utf-16-le")) // 2


def _tombstone(group_id: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group_id, topic, partition), None)


class OffsetCommitTopics(Protocol):
    """What every offset commit names: its group and its topics' partitions (plain or transactional)."""

    group_id: str
    topics: list[OffsetCommitTopic]


_Request = TypeVar("_Request", bound="OffsetCommitTopics")
_Groups = TypeVar("_Groups")


def _group_error(
    offsets: OffsetManager, groups: GroupView, request: OffsetCommitRequest, now_ms: int
) -> ErrorCode | None:
    """Step 2 of a plain commit: the group, member and generation (a function, not a closure made
    per commit). ``error_code_of``, inline: one call less on every commit."""
    try:
        groups.validate_offset_commit(
            request.group_id,
            request.member_id,
            request.group_instance_id,
            request.generation_id_or_member_epoch,
            request.api_version,
            now_ms,
        )
    except KafkaError as error:
        return error.code
    return None


class OffsetManager:
    """The committed offsets of every group whose offsets-log partition this shard owns."""

    def __init__(self, metadata_max_chars: int = OFFSET_METADATA_MAX_CHARS) -> None:
        self._metadata_max_chars = metadata_max_chars
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self.pending = PendingOffsets()

    # ------------------------------------------------------------ writes (return records)

    def commit(
        self,
        request: OffsetCommitRequest,
        sink: Any,
        now_ms: int,
        groups: GroupView,
        topic_exists: TopicExists,
    ) -> CoordinatorResult:
        """Handle an OffsetCommit: the records to append and the response they release.

        Steps, as PROTOCOL.md §2.8:
        1. a partition the broker does not host gets UNKNOWN_TOPIC_OR_PARTITION;
        2. if any partition is left, ``groups`` validates the group, member and generation;
           its error goes on every remaining partition and nothing is written;
        3. metadata longer than the limit gets OFFSET_METADATA_TOO_LARGE;
        4. every other partition becomes one OffsetCommit record.
        """

        expire_timestamp_ms = (
            NO_EXPIRE_TIMESTAMP
            if request.retention_time_ms == DEFAULT_RETENTION_TIME_MS
            else now_ms + request.retention_time_ms
        )
        # 1, 3 and 4 (2: _group_error).
        return self.commit_offsets(
            request, sink, topic_exists, groups, _group_error, now_ms, expire_timestamp_ms
        )

    def commit_offsets(
        self,
        request: _Request,
        sink: Any,
        topic_exists: TopicExists,
        groups: _Groups,
        group_error: Callable[[OffsetManager, _Groups, _Request, int], ErrorCode | None],
        now_ms: int,
        expire_timestamp_ms: int,
    ) -> CoordinatorResult:
        """The steps of every offset commit, plain or transactional: a partition the broker does not host
        gets UNKNOWN_TOPIC_OR_PARTITION; if any partition is left, ``group_error(self, groups,
        request, now_ms)`` gives the error every remaining one gets (None: the group accepts them);
        then metadata longer than the limit gets OFFSET_METADATA_TOO_LARGE and each other partition
        appends one OffsetCommit record, which the response waits for. ``group_error`` is a function,
        not a closure: making one per commit cost about 0.25 us.

        One pass: ``group_error`` is asked at the first hosted partition, which gives what asking
        after all the unknown ones would (it does not depend on the partitions; the host check is
        pure), and only when one is hosted."""
        records: list[CoordinatorRecord] = []
        group_id = request.group_id
        max_chars = self._metadata_max_chars
        unknown = ErrorCode.unknown_topic_or_partition
        asked = False  # the group is asked once, at the first partition the broker hosts (one pass)
        rejected: ErrorCode | None = None
        topic_results: list[OffsetCommitTopicResult] = []
        for topic in request.topics:
            name = topic.name
            partition_results: list[OffsetCommitPartitionResult] = []
            for partition in topic.partitions:
                index = partition.partition_index
                if not topic_exists(name, index):
                    partition_results.append(OffsetCommitPartitionResult(index, unknown))
                    continue
                if not asked:
                    rejected = group_error(self, groups, request, now_ms)
                    asked = True
                code = rejected
                metadata = partition.committed_metadata or ""
                # A character is one or two UTF-16 units: only metadata near the limit is measured.
                if code is None and 2 * len(metadata) > max_chars and _utf16_length(metadata) > max_chars:
                    code = ErrorCode.offset_metadata_too_large
                if code is None:
                    code = ErrorCode.none
                    records.append(  # positional (offset, epoch, metadata, times): keywords cost more
                        CoordinatorRecord(
                            OffsetCommitKey(group_id, name, index),
                            OffsetCommitValue(
                                partition.committed_offset,
                                partition.committed_leader_epoch,
                                metadata,
                                now_ms,
                                expire_timestamp_ms,
                            ),
                        )
                    )
                partition_results.append(OffsetCommitPartitionResult(index, code))
            topic_results.append(OffsetCommitTopicResult(name, partition_results))
        return CoordinatorResult(records, [(sink, OffsetCommitResponse(topic_results))])

    def delete_offsets(
        self,
        group_id: str,
        topics: list[OffsetDeleteTopic],
        sink: Any,
        groups: GroupView,
    ) -> CoordinatorResult:
        """Handle an OffsetDelete: tombstones for the named offsets of topics the group left.

        A group that does not exist (or is Dead) gets GROUP_ID_NOT_FOUND; a group with members
        whose protocol type is not ``consumer`` gets NON_EMPTY_GROUP, because the coordinator
        cannot tell which topics it uses. A topic some member subscribes to gets
        GROUP_SUBSCRIBED_TO_TOPIC on each of its partitions. A partition without an offset
        succeeds without a record.
        """
        result = CoordinatorResult()
        group_offsets = self._offsets.get(group_id, {})
        state = groups.group_state(group_id)
        # A group with offsets here exists even if the group side has not heard of it: offsets
        # committed without membership make a simple group.
        if state is None and group_offsets:
            state = EMPTY_STATE
        if state is None or state == DEAD_STATE:
            result.respond(sink, OffsetDeleteResponse(ErrorCode.group_id_not_found))
            return result
        if state != EMPTY_STATE and groups.protocol_type(group_id) != CONSUMER_PROTOCOL_TYPE:
            result.respond(sink, OffsetDeleteResponse(ErrorCode.non_empty_group))
            return result
        topic_results: list[OffsetDeleteTopicResult] = []
        for topic in topics:
            if groups.is_subscribed(group_id, topic.name):
                code = ErrorCode.group_subscribed_to_topic
            else:
                code = ErrorCode.none
                result.records.extend(
                    _tombstone(group_id, topic.name, partition)
                    for partition in topic.partition_indexes
                    if (topic.name, partition) in group_offsets
                    or self.pending.has_partition(group_id, topic.name, partition)
                )
            topic_results.append(
                OffsetDeleteTopicResult(
                    topic.name,
                    [OffsetDeletePartitionResult(partition, code) for partition in topic.partition_indexes],
                )
            )
        result.respond(sink, OffsetDeleteResponse(ErrorCode.none, topic_results))
        return result

    def delete_group_offsets(self, group_id: str) -> list[CoordinatorRecord]:
        """Tombstones for every offset of a group that DeleteGroups removes (already validated), and
        for each partition only a pending transactional offset holds (its tombstone drops it, as Kafka)."""
        committed = self._sorted_keys(group_id)
        known = set(committed)
        pending = [key for key in self.pending.partitions(group_id) if key not in known]
        return [_tombstone(group_id, topic, partition) for topic, partition in [*committed, *pending]]

    def expire(self, now_ms: int, retention_ms: int, groups: GroupView) -> list[CoordinatorRecord]:
        """Tombstones for every offset past ``offsets.retention.minutes`` (see :mod:`offset_expiry`)."""
        tombstones: list[CoordinatorRecord] = []
        for group_id, group_offsets in self._offsets.items():
            rule = group_expiry_rule(
                state=groups.group_state(group_id),
                protocol_type=groups.protocol_type(group_id),
                simple_or_missing=groups.is_simple_or_missing(group_id),
                empty_since_ms=groups.empty_since_ms(group_id),
            )
            if rule is None:
                continue
            subscribed: dict[str, bool] = {}
            for (topic, partition), committed in sorted(group_offsets.items()):
                if topic not in subscribed:
                    subscribed[topic] = groups.is_subscribed(group_id, topic)
                if subscribed[topic] or self.pending.has_partition(group_id, topic, partition):
                    continue
                if is_offset_expired(
                    rule,
                    committed.commit_timestamp,
                    committed.expire_timestamp,
                    now_ms,
                    retention_ms,
                ):
                    tombstones.append(_tombstone(group_id, topic, partition))
        return tombstones

    # ------------------------------------------------------------ replay (the only mutation)

    def replay(self, record: CoordinatorRecord) -> None:
        """Apply one appended (or loaded) record; records of other types are not ours and are ignored."""
        key = record.key
        if not isinstance(key, OffsetCommitKey):
            return
        value = record.value
        if value is None:
            self.replay_offset(key.group, key.topic, key.partition, None)
            return
        if not isinstance(value, OffsetCommitValue):
            raise TypeError(f"OffsetCommit key with a {type(value).__name__} value")
        self.replay_offset(key.group, key.topic, key.partition, value)

    def on_appended(self, records: list[CoordinatorRecord]) -> None:
        """The offset commits among records just made durable, replayed (the others are not ours).

        :meth:`replay` and :meth:`replay_offset` in one loop: this runs for every commit."""
        offsets = self._offsets
        for record in records:
            key = record.key
            if type(key) is not OffsetCommitKey:
                if isinstance(key, OffsetCommitKey):
                    self.replay(record)
                continue
            value = record.value
            if type(value) is not OffsetCommitValue:
                self.replay(record)
                continue
            group_offsets = offsets.get(key.group)
            if group_offsets is None:
                group_offsets = offsets[key.group] = {}
            group_offsets[(key.topic, key.partition)] = value

    def replay_offset(
        self, group: str, topic: str, partition: int, committed: CommittedOffset | None
    ) -> None:
        """What replaying one OffsetCommit record does (None: a tombstone).

        :meth:`replay` ends here; loading a partition calls it directly with the record's fields,
        sparing the record objects that a profile of the load showed costing more than the rest.
        """
        if committed is None:
            if self.pending:
                self.pending.drop_partition(group, topic, partition)
            group_offsets = self._offsets.get(group)
            if group_offsets is None:
                return
            group_offsets.pop((topic, partition), None)
            if not group_offsets:
                del self._offsets[group]
            return
        self._offsets.setdefault(group, {})[(topic, partition)] = committed

    def replay_transactional(self, record: CoordinatorRecord, producer_id: int, producer_epoch: int) -> None:
        """An OffsetCommit record of ``producer_id``'s transaction: pending until the producer's marker.

        A tombstone in a transactional batch (Kafka never writes one) deletes as any tombstone does."""
        key, value = record.key, record.value
        if not isinstance(key, OffsetCommitKey):
            return
        if not isinstance(value, OffsetCommitValue):
            self.replay(record)
            return
        before = self.committed(key.group, key.topic, key.partition)
        self.pending.add(producer_id, producer_epoch, key.group, key.topic, key.partition, value, before)

    def end_transaction(self, producer_id: int, committed: bool, producer_epoch: int = -1) -> None:
        """The producer's marker: its pending offsets become committed (unless a later commit of the
        partition is already there, as Kafka keeps the most recent), or are dropped on an abort."""
        ended = self.pending.end(producer_id)
        if committed:
            for group, partitions in ended.items():
                for (topic, partition), pending in partitions.items():
                    current = self.committed(group, topic, partition)
                    if self.pending.written_later(group, topic, partition, current, pending):
                        continue
                    self._offsets.setdefault(group, {})[(topic, partition)] = pending.committed
                    self.pending.note_materialized(group, topic, partition, pending)
        self.pending.settled(ended, producer_id, producer_epoch, committed)

    # ------------------------------------------------------------ reads

    def fetch(
        self,
        group_id: str,
        topics: list[OffsetFetchTopic] | None,
        require_stable: bool = False,
    ) -> OffsetFetchResponse:
        """Handle OffsetFetch for one group; ``topics=None`` asks for all of its offsets.

        An unknown group or partition is not an error: it answers offset -1, epoch -1 and
        metadata "". With ``require_stable``, a partition a transaction holds a pending offset for
        answers UNSTABLE_OFFSET_COMMIT (offset -1), per partition as Kafka does; an all-topics
        fetch lists the partitions with a committed offset, as Kafka's does.
        """
        group_offsets = self._offsets.get(group_id, {})
        if require_stable and self.pending.has_group(group_id):
            return self._fetch_stable(group_id, topics)
        if topics is None:
            by_topic: dict[str, list[OffsetFetchPartitionResult]] = {}
            for topic, partition in self._sorted_keys(group_id):
                by_topic.setdefault(topic, []).append(
                    _fetch_result(partition, group_offsets[(topic, partition)])
                )
            return OffsetFetchResponse(
                group_id, [OffsetFetchTopicResult(name, results) for name, results in by_topic.items()]
            )
        return OffsetFetchResponse(
            group_id,
            [
                OffsetFetchTopicResult(
                    topic.name,
                    [
                        _fetch_result(partition, group_offsets.get((topic.name, partition)))
                        for partition in topic.partition_indexes
                    ],
                )
                for topic in topics
            ],
        )

    def _fetch_stable(self, group_id: str, topics: list[OffsetFetchTopic] | None) -> OffsetFetchResponse:
        """:meth:`fetch` for a group with pending transactional offsets and ``require_stable``."""
        fetched = self.fetch(group_id, topics)
        for topic in fetched.topics:
            topic.partitions = [
                OffsetFetchPartitionResult(
                    p.partition_index, NO_OFFSET, NO_LEADER_EPOCH, "", ErrorCode.unstable_offset_commit
                )
                if self.pending.has_partition(group_id, topic.name, p.partition_index)
                else p
                for p in topic.partitions
            ]
        return fetched

    def group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The committed offset of each topic-partition of a group (empty when it has none)."""
        return {tp: committed.offset for tp, committed in self._offsets.get(group_id, {}).items()}

    def committed(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        """The full committed entry of one partition, or None."""
        return self._offsets.get(group_id, {}).get((topic, partition))

    def open_transactions(self, group_id: str) -> list[OpenTransaction]:
        """The open transactions holding pending offsets of the group (for operators)."""
        return self.pending.open_transactions(group_id)

    def settled_transactions(self, group_id: str) -> list[SettledTransaction]:
        """The group's last ended transactions, oldest first (for its history)."""
        return self.pending.settled_transactions(group_id)

    def has_offsets(self, group_id: str) -> bool:
        """Whether the group has any committed offset (after expiry, an Empty group without any can go)."""
        return group_id in self._offsets

    def all_groups_with_offsets(self) -> list[str]:
        """Ids of every group with at least one committed offset, sorted."""
        return sorted(self._offsets)

    def _sorted_keys(self, group_id: str) -> list[TopicPartition]:
        return sorted(self._offsets.get(group_id, {}))


def _fetch_result(partition: int, committed: CommittedOffset | None) -> OffsetFetchPartitionResult:
    if committed is None:
        return OffsetFetchPartitionResult(partition, NO_OFFSET, NO_LEADER_EPOCH, "")
    return OffsetFetchPartitionResult(partition, committed.offset, committed.leader_epoch, committed.metadata)


def error_code_of(check: Callable[_P, object], *args: _P.args, **kwargs: _P.kwargs) -> ErrorCode | None:
    """The code of the :class:`KafkaError` ``check`` raises; None when it passes."""
    try:
        check(*args, **kwargs)
    except KafkaError as error:
        return error.code
    return None
