"""Leader epochs as Kafka's partition leader applies them to consumers (KIP-101, KIP-320).

Each partition has a leader epoch: in a cluster the owner epoch every claim bumps, alone 0 (a
single Kafka broker's partitions stay at the epoch they were created with, 0, too). The log
stamps it on every batch it appends, Metadata reports it, and clients send it back:

- **current_leader_epoch** (Fetch v9+, ListOffsets v4+, OffsetForLeaderEpoch v2+) is the epoch
  the client's metadata names. Kafka's ``Partition.checkCurrentLeaderEpoch``: -1 is not checked;
  older than the leader's is FENCED_LEADER_EPOCH (the client's metadata is stale), newer is
  UNKNOWN_LEADER_EPOCH (this node's is); both make the client refresh its metadata and retry.
- **OffsetForLeaderEpoch** asks where an epoch ended, so a consumer that read records of that
  epoch up to its position can check nothing below the position was lost with the leader change.
  Kafka's ``LeaderEpochFileCache.endOffsetFor``: the leader's own epoch ends at the log end;
  an older one ends where the next recorded epoch starts, answered with the nearest recorded epoch
  at or below it (the requested one when none is); a newer one, or -1, is unknown (-1, -1).
  Where each epoch starts is recorded when a node claims the partition (the log end then).
  kcoord's logs are shared and never diverge, so every end offset is at or past every position
  a consumer took from that epoch: validation passes, and nothing is consumed twice or skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.api import PartitionLog
from kcoord.storage.postgres.ownership import EpochStart, Ownership

__all__ = [
    "NO_EPOCH",
    "EpochEnd",
    "EpochHistory",
    "RecordedEpochs",
    "current_epoch_error",
    "end_offset_for",
    "led_log",
]

NO_EPOCH = -1
"""A client's "no epoch": nothing is checked (Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH)."""


@dataclass(frozen=True, slots=True)
class EpochEnd:
    epoch: int
    end_offset: int


UNDEFINED = EpochEnd(NO_EPOCH, -1)


def current_epoch_error(current_leader_epoch: int, leader_epoch: int) -> ErrorCode:
    """The error for a request made with ``current_leader_epoch`` to the leader at ``leader_epoch``."""
    if current_leader_epoch in (NO_EPOCH, leader_epoch):
        return ErrorCode.none
    if current_leader_epoch < leader_epoch:
        return ErrorCode.fenced_leader_epoch
    return ErrorCode.unknown_leader_epoch


def led_log(
    topics: TopicManager, topic: str, partition: int, current_leader_epoch: int
) -> tuple[PartitionLog | None, ErrorCode]:
    """The log this node leads, or None with the error to answer: UNKNOWN_TOPIC_OR_PARTITION,
    NOT_LEADER_OR_FOLLOWER (another node leads it), or the current epoch check's."""
    partition_log = topics.partition_log(topic, partition)
    if partition_log is None:
        return None, topics.missing_log_error(topic, partition)
    error = current_epoch_error(current_leader_epoch, partition_log.leader_epoch)
    return (partition_log, error) if error == ErrorCode.none else (None, error)


def end_offset_for(
    requested: int, leader_epoch: int, log_end_offset: int, below: EpochStart | None, above: EpochStart | None
) -> EpochEnd:
    """Where ``requested`` ended, as the leader at ``leader_epoch`` knows it: ``below`` is the
    recorded epoch nearest at or below ``requested``, ``above`` the first recorded one after it
    (at most ``leader_epoch``)."""
    if requested < 0 or requested > leader_epoch:
        return UNDEFINED
    if requested == leader_epoch:
        return EpochEnd(leader_epoch, log_end_offset)
    epoch = requested if below is None else below.epoch
    if above is None:
        # The leader's own epoch was not recorded (claimed before the table existed, or a node alone
        # over a database a cluster used): the log never diverges, so the end is at most the log end.
        return EpochEnd(epoch, log_end_offset)
    return EpochEnd(epoch, above.start_offset)


class EpochHistory(Protocol):
    """Where a partition's past leader epochs started."""

    async def around(
        self, topic: str, partition: int, epoch: int, latest: int
    ) -> tuple[EpochStart | None, EpochStart | None]:
        """The recorded epoch nearest at or below ``epoch`` and the first above it (up to ``latest``)."""


class RecordedEpochs:
    """The epochs each claim recorded in PostgreSQL (``leader_epochs``) once the node joined a
    cluster; alone, a partition has only ever had its one epoch, so nothing older is recorded."""

    def __init__(self) -> None:
        self.ownership: Ownership | None = None
        """Set when the node joins a cluster."""

    async def around(
        self, topic: str, partition: int, epoch: int, latest: int
    ) -> tuple[EpochStart | None, EpochStart | None]:
        if self.ownership is None:
            return None, None
        return await self.ownership.epochs_around(topic, partition, epoch, latest)
