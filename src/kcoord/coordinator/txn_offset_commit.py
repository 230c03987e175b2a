"""TxnOffsetCommit in the group's shard: the checks and the records of a transactional offset commit.

Kafka's ``OffsetMetadataManager.commitTransactionalOffset``. The records are ordinary
OffsetCommit records; the runtime writes them as one transactional batch of the producer
(:meth:`~kcoord.runtime.service.CoordinatorService.write_transactional`), and replaying that batch
files them as pending offsets (:mod:`kcoord.coordinator.pending_offsets`) until the producer's
marker. The checks, in order:

1. a partition the broker does not host gets UNKNOWN_TOPIC_OR_PARTITION (Kafka's broker checks
   this before the coordinator);
2. a producer epoch older than the one this shard holds pending offsets for is a fenced producer's:
   INVALID_PRODUCER_EPOCH for every partition, nothing written;
3. KIP-447, against the group: a missing group is created as a simple group when the generation
   is -1, else ILLEGAL_GENERATION; an existing one checks the member id (UNKNOWN_MEMBER_ID), the
   group instance id (FENCED_INSTANCE_ID) and the generation (ILLEGAL_GENERATION) when given.
   The error goes on every remaining partition and nothing is written;
4. metadata longer than ``offset.metadata.max.bytes`` gets OFFSET_METADATA_TOO_LARGE;
5. every other partition becomes one OffsetCommit record (no expiry of its own: the broker's
   retention applies, as OffsetCommit v5+).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kcoord.coordinator.offset_expiry import NO_EXPIRE_TIMESTAMP
from kcoord.coordinator.offsets import (
    OffsetCommitTopic,
    OffsetManager,
    error_code_of,
)
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import ErrorCode

__all__ = ["TransactionalGroupView", "TxnOffsetCommitRequest", "commit_transactional"]


@dataclass(slots=True)
class TxnOffsetCommitRequest:
    """One TxnOffsetCommit, any version (v0-2 carry no member: generation -1, member "")."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    topics: list[OffsetCommitTopic]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class TransactionalGroupView(Protocol):
    """What a transactional commit asks of the groups (the shard's ``GroupsView``)."""

    def validate_transactional_commit(
        self, group_id: str, member_id: str, instance: str | None, generation: int, now_ms: int
    ) -> None: ...


def commit_transactional(
    offsets: OffsetManager,
    request: TxnOffsetCommitRequest,
    sink: Any,
    now_ms: int,
    groups: TransactionalGroupView,
    topic_exists: Callable[[str, int], bool],
) -> CoordinatorResult:
    """The records of a TxnOffsetCommit (to be written for its producer) and the response they release."""
    # 1, 4 and 5 (2 and 3: _group_error).
    return offsets.commit_offsets(
        request, sink, topic_exists, groups, _group_error, now_ms, NO_EXPIRE_TIMESTAMP
    )


def _group_error(
    offsets: OffsetManager, groups: TransactionalGroupView, request: TxnOffsetCommitRequest, now_ms: int
) -> ErrorCode | None:
    """Steps 2 and 3 of a transactional commit, asked once a partition is hosted."""
    # 2. A fenced producer.
    known_epoch = offsets.pending.epoch_of(request.producer_id)
    if known_epoch is not None and request.producer_epoch < known_epoch:
        return ErrorCode.invalid_producer_epoch
    # 3. KIP-447: the group, member, instance and generation.
    return error_code_of(
        groups.validate_transactional_commit,
        request.group_id,
        request.member_id,
        request.group_instance_id,
        request.generation_id,
        now_ms,
    )
