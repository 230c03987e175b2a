"""Group commit across the logs of one store: one write round, and its fsyncs together, for many appends.

Every :class:`~kcoord.storage.file_log.FileLog` of a store queues its writes here instead of
running its own writer. One drain task takes what *every* log has queued, hands the whole round
to one executor job, and completes each log's appends back on the event loop. While a round is
on disk the loop keeps accepting appends, which form the next round: under load a round holds
every request that arrived during the previous one (group commit across requests and across
partitions), and an idle store still writes a lone append at once.

A round writes each log's batches with one ``writev`` per segment and then makes every file that
needs it (flush policy ``always``) durable at once: an ``fdatasync`` of each, submitted together
through AIO (``syncfs`` where there is no AIO fsync), ``fdatasync`` for a lone file
(:mod:`kcoord.storage.durable_sync`). A log whose write fails fails only its own appends; a failed
sync fails every log it covered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Protocol

from kcoord.storage.commit_rounds import CommitRounds, RoundParticipant
from kcoord.storage.durable_sync import DurableSync, SyncFiles

__all__ = ["CommitJob", "GroupCommitter", "JobOutcome", "RoundWriter"]

JobOutcome = BaseException | float | None
"""What a log's part of a round did: its exception, the seconds its fsync took, or None (no fsync)."""


class CommitJob(Protocol):
    """A log's part of one round, run in the writer thread."""

    def write(self) -> list[int]:
        """Write the queued bytes; return the descriptors the round must make durable (may be empty)."""


RoundWriter = RoundParticipant[CommitJob, JobOutcome]
"""A file log as the committer sees it."""


class GroupCommitter(CommitRounds[CommitJob, JobOutcome]):
    """The store's single writer: rounds of writes and fsyncs across all of its logs."""

    def __init__(self, executor: Executor, *, sync: SyncFiles | None = None) -> None:
        """``sync`` makes a round's files durable (default: a :class:`DurableSync` of the committer's own)."""
        super().__init__()
        self._executor = executor
        self._own_sync: DurableSync | None = None
        if sync is None:
            sync = self._own_sync = DurableSync()
        self._sync = sync

    def close(self) -> None:
        """Release what the round sync holds (its AIO context); call once no round is under way."""
        if self._own_sync is not None:
            self._own_sync.close()

    async def _run_round(self, jobs: list[tuple[RoundWriter, CommitJob]]) -> None:
        try:
            outcomes = await asyncio.get_running_loop().run_in_executor(
                self._executor, self._write_round, [job for _, job in jobs]
            )
        except BaseException as exc:
            for writer, job in jobs:
                writer.finish_job(job, exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, Exception):
                raise
            return
        self.rounds += 1
        for (writer, job), outcome in zip(jobs, outcomes, strict=True):
            writer.finish_job(job, outcome)

    def _write_round(self, jobs: Sequence[CommitJob]) -> list[JobOutcome]:
        """In the writer thread: every job's writes in order, then one sync for all of them."""
        outcomes: list[JobOutcome] = [None] * len(jobs)
        synced: list[int] = []
        fds: list[int] = []
        for index, job in enumerate(jobs):
            try:
                job_fds = job.write()
            except Exception as exc:
                outcomes[index] = exc
                continue
            if job_fds:
                synced.append(index)
                fds.extend(job_fds)
        if not fds:
            return outcomes
        started = time.perf_counter()
        try:
            self._sync(fds)
        except Exception as exc:
            for index in synced:
                outcomes[index] = exc
            return outcomes
        seconds = time.perf_counter() - started
        for index in synced:
            outcomes[index] = seconds
        return outcomes
