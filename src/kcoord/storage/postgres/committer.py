"""Group commit for the ``postgresql://`` engine: one transaction per round for many appends.

Every :class:`~kcoord.storage.postgres.log.PostgresLog` of a store queues its rows here. One
drain task takes what every log has queued and writes the whole round in one transaction on one
connection: one statement (:data:`COMMIT_ROUND`) inserting its new segments and batches, which
PostgreSQL runs as one transaction in one round trip. While a
round is in flight the loop keeps accepting appends, which form the next round: under load one
commit (one WAL flush) carries every append that arrived during the previous one.

A failed round fails every append in it (nothing of it was committed); each log then cuts itself
back to what is durable before it takes appends again (see ``SegmentedLog._recover``).

Fencing: the round carries each log's owner epoch (the one it was granted, see
:mod:`kcoord.storage.postgres.ownership`) and inserts only the rows of partitions whose
``log_partitions.owner_epoch`` still matches, checked in the same statement under a ``FOR SHARE``
row lock, which an ownership change (an ``UPDATE`` of that row) waits for and which re-checks a
row such a change updated meanwhile. The statement returns the partitions it accepted; every
other log of the round was fenced: its appends fail with :class:`PartitionFencedError` and it never
writes again. A node that never changes owners (one node over PostgreSQL) keeps epoch 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.commit_rounds import CommitRounds, RoundParticipant

__all__ = ["BatchRow", "PartitionFencedError", "PostgresCommitter", "RoundJob", "RoundLog", "SegmentRow"]

SegmentRow = tuple[str, int, int, int]
"""(topic, partition, base offset, created ms)."""

BatchRow = tuple[str, int, int, int, int, int, bytes]
"""(topic, partition, base offset, last offset, max timestamp, size, data)."""


COMMIT_ROUND = """
WITH owned AS (
    SELECT p.topic, p.partition_id
    FROM log_partitions p
    JOIN unnest($12::text[], $13::integer[], $14::bigint[]) AS e(topic, partition_id, epoch)
      ON p.topic = e.topic AND p.partition_id = e.partition_id AND p.owner_epoch = e.epoch
    FOR SHARE OF p
), new_segments AS (
    INSERT INTO log_segments (topic, partition_id, base_offset, created_ms)
    SELECT s.* FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::bigint[])
        AS s(topic, partition_id, base_offset, created_ms)
    WHERE (s.topic, s.partition_id) IN (SELECT topic, partition_id FROM owned)
    ON CONFLICT DO NOTHING
), new_batches AS (
    INSERT INTO log_batches (topic, partition_id, base_offset, last_offset, max_timestamp, size, data)
    SELECT b.* FROM unnest($5::text[], $6::integer[], $7::bigint[], $8::bigint[], $9::bigint[],
                           $10::integer[], $11::bytea[])
        AS b(topic, partition_id, base_offset, last_offset, max_timestamp, size, data)
    WHERE (b.topic, b.partition_id) IN (SELECT topic, partition_id FROM owned)
)
SELECT topic, partition_id FROM owned
"""
"""A whole round as one statement, so one transaction and one round trip however many appends it holds."""


class PartitionFencedError(KafkaError):
    """The partition's owner epoch moved on: another node owns it now, this log may never write again."""

    def __init__(self, topic: str, partition: int, epoch: int) -> None:
        super().__init__(
            ErrorCode.not_leader_or_follower, f"{topic}-{partition}: owner epoch {epoch} was fenced"
        )
        self.topic = topic
        self.partition = partition
        self.epoch = epoch


@dataclass(slots=True)
class RoundJob:
    """A log's part of one round: its rows and the owner epoch they are written under."""

    topic: str
    partition: int
    epoch: int
    segments: list[SegmentRow] = field(default_factory=list)
    batches: list[BatchRow] = field(default_factory=list)


RoundLog = RoundParticipant[RoundJob, BaseException | None]
"""A PostgreSQL log as the committer sees it (its job's outcome: None, or why it failed)."""


class PostgresCommitter(CommitRounds[RoundJob, BaseException | None]):
    """The store's single writer: rounds of inserts, one transaction each, across all its logs."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__()
        self._pool = pool
        self.fenced = 0
        """Jobs refused because their partition's owner epoch had moved on."""

    async def _run_round(self, jobs: list[tuple[RoundLog, RoundJob]]) -> None:
        try:
            owned = await self._commit([job for _, job in jobs])
        except Exception as exc:
            for log, job in jobs:
                log.finish_job(job, exc)
            return
        self.rounds += 1
        for log, job in jobs:
            if (job.topic, job.partition) in owned:
                log.finish_job(job, None)
            else:
                self.fenced += 1
                log.finish_job(job, PartitionFencedError(job.topic, job.partition, job.epoch))

    async def _commit(self, jobs: list[RoundJob]) -> set[tuple[str, int]]:
        """Write the round; the partitions whose epoch held (the others' rows were not written)."""
        segments = _columns([row for job in jobs for row in job.segments], 4)
        batches = _columns([row for job in jobs for row in job.batches], 7)
        epochs = _columns([(job.topic, job.partition, job.epoch) for job in jobs], 3)
        async with self._pool.acquire() as connection:
            rows = await connection.fetch(COMMIT_ROUND, *segments, *batches, *epochs)
        return {(row["topic"], row["partition_id"]) for row in rows}


def _columns(rows: Sequence[tuple[object, ...]], width: int) -> list[list[object]]:
    """Rows as one list per column (what ``unnest`` takes), ``width`` empty lists for no rows."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]
