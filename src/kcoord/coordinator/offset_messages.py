"""The shapes of the offsets API: OffsetCommit, OffsetFetch and OffsetDelete messages, the committed
state and what the offset manager asks of the group side (:class:`GroupView`).

They are version-neutral: the per-API edge modules map each wire version onto them (fields a version
lacks take the defaults given here). :mod:`kcoord.coordinator.offsets` holds the manager that uses them
and re-exports every name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from kcoord.coordinator.records import OffsetCommitValue
from kcoord.protocol.errors import ErrorCode

DEFAULT_RETENTION_TIME_MS = -1
"""OffsetCommit v2-v4 ``retention_time_ms`` meaning "use the broker's retention"."""

OFFSET_METADATA_MAX_CHARS = 4096
"""``offset.metadata.max.bytes`` default. Kafka compares it with ``String.length()``, i.e. UTF-16
code units, despite the name."""

NO_OFFSET = -1
NO_LEADER_EPOCH = -1


class GroupView(Protocol):
    """What the offset manager asks of the group state machines of the same shard.

    ``group_state`` names use Kafka's spelling ("Empty", "PreparingRebalance",
    "CompletingRebalance", "Stable", "Dead"); None means the group does not exist.
    """

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        api_version: int,
        now_ms: int,
    ) -> None:
        """Checks 2-7 of PROTOCOL.md §2.8; raises ``KafkaError`` to reject the whole commit.

        Accepting a commit from an unknown group with generation < 0 creates a simple group;
        an accepted commit from a member of a Stable or PreparingRebalance classic group
        also moves that member's session deadline.
        """

    def group_state(self, group_id: str) -> str | None:
        """The group's state name, or None when the group does not exist."""

    def protocol_type(self, group_id: str) -> str | None:
        """The group's protocol type ("consumer", "connect", ...); None for simple or missing groups."""

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        """Whether any member of the group currently subscribes to ``topic``."""

    def empty_since_ms(self, group_id: str) -> int | None:
        """When the group last became Empty; None when it is not Empty or the time is unknown."""

    def is_simple_or_missing(self, group_id: str) -> bool:
        """True for a group without a protocol type (offsets only) or no group at all."""


_Partition = TypeVar("_Partition")

TopicExists = Callable[[str, int], bool]
"""``topic_exists(topic, partition)``: whether the broker hosts that topic-partition."""


# ---------------------------------------------------------------- shapes the messages share


@dataclass(slots=True)
class TopicPartitionIndexes:
    """A topic and some of its partitions, as OffsetFetch and OffsetDelete name them."""

    name: str
    partition_indexes: list[int]


@dataclass(slots=True)
class PartitionErrorResult:
    """A partition's answer that is only an error code (OffsetCommit, OffsetDelete)."""

    partition_index: int
    error_code: ErrorCode


@dataclass(slots=True)
class Topic(Generic[_Partition]):
    """A topic and its partitions' part of a message: every OffsetCommit topic, request or response,
    and every OffsetFetch and OffsetDelete topic answer has this shape.

    Each kind is a subclass, not an alias such as ``Topic[OffsetFetchPartitionResult]``: calling a
    generic alias costs about 0.5 us more per topic (typing's ``__call__``), on the OffsetFetch and
    OffsetCommit paths."""

    name: str
    partitions: list[_Partition]


class TopicErrorResults(Topic[PartitionErrorResult]):
    __slots__ = ()


# ---------------------------------------------------------------- OffsetCommit messages


@dataclass(slots=True)
class OffsetCommitPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = NO_LEADER_EPOCH
    committed_metadata: str | None = ""


class OffsetCommitTopic(Topic[OffsetCommitPartition]):
    __slots__ = ()


@dataclass(slots=True)
class OffsetCommitRequest:
    """One OffsetCommit, any version. From v9 ``generation_id_or_member_epoch`` is a member epoch."""

    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    topics: list[OffsetCommitTopic]
    api_version: int
    group_instance_id: str | None = None
    retention_time_ms: int = DEFAULT_RETENTION_TIME_MS


OffsetCommitPartitionResult = PartitionErrorResult
OffsetCommitTopicResult = TopicErrorResults


@dataclass(slots=True)
class OffsetCommitResponse:
    topics: list[OffsetCommitTopicResult]


# ---------------------------------------------------------------- OffsetFetch messages


OffsetFetchTopic = TopicPartitionIndexes


@dataclass(slots=True)
class OffsetFetchPartitionResult:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    error_code: ErrorCode = ErrorCode.none


class OffsetFetchTopicResult(Topic[OffsetFetchPartitionResult]):
    __slots__ = ()


@dataclass(slots=True)
class OffsetFetchResponse:
    """One group's answer. ``error_code`` is the group-level error (v2+ top level, v8+ per group)."""

    group_id: str
    topics: list[OffsetFetchTopicResult]
    error_code: ErrorCode = ErrorCode.none


# ---------------------------------------------------------------- OffsetDelete messages


OffsetDeleteTopic = TopicPartitionIndexes
OffsetDeletePartitionResult = PartitionErrorResult
OffsetDeleteTopicResult = TopicErrorResults


@dataclass(slots=True)
class OffsetDeleteResponse:
    """A group-level ``error_code`` comes with no topics, as in Kafka."""

    error_code: ErrorCode
    topics: list[OffsetDeleteTopicResult] = field(default_factory=list)


# ---------------------------------------------------------------- state


CommittedOffset = OffsetCommitValue
"""One partition's committed position: the value of its latest OffsetCommit record, kept as replayed
(records are the truth; the state is no copy of them)."""


TopicPartition = tuple[str, int]
