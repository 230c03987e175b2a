"""Group commit for the ``postgresql://`` engine: one transaction per round for many appends.

Every :class:`~kcoord.storage.postgres.log.PostgresLog` of a store queues its rows here. One
drain task takes what every log has queued and writes the whole round in one transaction on one
connection: one statement (:data:`COMMIT_ROUND`) inserting its new segments and batches, which
PostgreSQL runs as one transaction in one round trip. While a
round is in flight the loop keeps accepting appends, which form the next round: under load one
commit (one WAL flush) carries every append that arrived during the previous one.

A failed round fails every append in it (nothing of it was committed); each log then cuts itself
back to what is durable before it takes appends again (see ``SegmentedLog._recover``).

Fencing, later: the round will carry each partition's granted epoch as one more array and insert
only rows whose ``log_partitions.owner_epoch`` still matches (a join in the same statement, under
the row lock an ownership change takes with ``UPDATE``); the rows returned tell which logs were
fenced, and those answer NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import asyncpg

__all__ = ["BatchRow", "PostgresCommitter", "RoundJob", "RoundLog", "SegmentRow"]

SegmentRow = tuple[str, int, int, int]
"""(topic, partition, base offset, created ms)."""

BatchRow = tuple[str, int, int, int, int, int, bytes]
"""(topic, partition, base offset, last offset, max timestamp, size, data)."""


COMMIT_ROUND = """
WITH new_segments AS (
    INSERT INTO log_segments (topic, partition_id, base_offset, created_ms)
    SELECT * FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::bigint[])
    ON CONFLICT DO NOTHING
)
INSERT INTO log_batches (topic, partition_id, base_offset, last_offset, max_timestamp, size, data)
SELECT * FROM unnest($5::text[], $6::integer[], $7::bigint[], $8::bigint[], $9::bigint[], $10::integer[],
                     $11::bytea[])
"""
"""A whole round as one statement, so one transaction and one round trip however many appends it holds."""


@dataclass(slots=True)
class RoundJob:
    """A log's part of one round."""

    segments: list[SegmentRow] = field(default_factory=list)
    batches: list[BatchRow] = field(default_factory=list)


class RoundLog(Protocol):
    """A log as the committer sees it."""

    def take_job(self) -> RoundJob | None:
        """Everything queued so far (None: nothing); later appends wait for the next round."""

    def finish_job(self, job: RoundJob, failure: BaseException | None) -> None:
        """Complete (or fail) the job's appends."""


class PostgresCommitter:
    """The store's single writer: rounds of inserts, one transaction each, across all its logs."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._waiting: dict[RoundLog, None] = {}
        self._drainer: asyncio.Task[None] | None = None
        self.rounds = 0
        """Rounds committed so far (tests and the bench read it)."""

    def request(self, log: RoundLog) -> None:
        """``log`` has queued work: it joins the next round (a round starts at once when idle)."""
        self._waiting[log] = None
        if self._drainer is None:
            self._drainer = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._waiting:
                logs, self._waiting = list(self._waiting), {}
                jobs = [(log, job) for log in logs if (job := log.take_job()) is not None]
                if not jobs:
                    continue
                try:
                    await self._commit([job for _, job in jobs])
                except Exception as exc:
                    for log, job in jobs:
                        log.finish_job(job, exc)
                    continue
                self.rounds += 1
                for log, job in jobs:
                    log.finish_job(job, None)
        finally:
            self._drainer = None

    async def _commit(self, jobs: list[RoundJob]) -> None:
        segments = _columns([row for job in jobs for row in job.segments], 4)
        batches = _columns([row for job in jobs for row in job.batches], 7)
        async with self._pool.acquire() as connection:
            await connection.execute(COMMIT_ROUND, *segments, *batches)


def _columns(rows: Sequence[tuple[object, ...]], width: int) -> list[list[object]]:
    """Rows as one list per column (what ``unnest`` takes), ``width`` empty lists for no rows."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]
