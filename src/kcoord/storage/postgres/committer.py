"""Group commit for the ``postgresql://`` engine: one transaction per round for many appends.

Every :class:`~kcoord.storage.postgres.log.PostgresLog` of a store queues its rows here. One
drain task takes what every log has queued and writes the whole round in one transaction on one
connection (new segments, then the batches, each with one pipelined ``executemany``). While a
round is in flight the loop keeps accepting appends, which form the next round: under load one
commit (one WAL flush) carries every append that arrived during the previous one.

A failed round fails every append in it (nothing of it was committed); each log then cuts itself
back to what is durable before it takes appends again (see ``SegmentedLog._recover``).

Fencing, later: each round will lock the rows of ``log_partitions`` it writes (``SELECT ...
FOR SHARE``) and compare their ``owner_epoch`` with the epoch the node was granted; a mismatch
aborts only that log's part (NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR) before the commit.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

import asyncpg

__all__ = ["BatchRow", "PostgresCommitter", "RoundJob", "RoundLog", "SegmentRow"]

SegmentRow = tuple[str, int, int, int]
"""(topic, partition, base offset, created ms)."""

BatchRow = tuple[str, int, int, int, int, int, bytes]
"""(topic, partition, base offset, last offset, max timestamp, size, data)."""


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
        segments = [row for job in jobs for row in job.segments]
        batches = [row for job in jobs for row in job.batches]
        async with self._pool.acquire() as connection, connection.transaction():
            if segments:
                await connection.executemany(
                    "INSERT INTO log_segments (topic, partition_id, base_offset, created_ms)"
                    " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                    segments,
                )
            if batches:
                await connection.executemany(
                    "INSERT INTO log_batches"
                    " (topic, partition_id, base_offset, last_offset, max_timestamp, size, data)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    batches,
                )
