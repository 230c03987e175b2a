"""Group commit across the logs of one store: one write round, and its fsyncs together, for many appends.

Every :class:`~kcoord.storage.file_log.FileLog` of a store queues its writes here instead of
running its own writer. One drain task takes what *every* log has queued, hands the whole round
to one executor job, and completes each log's appends back on the event loop. While a round is
on disk the loop keeps accepting appends, which form the next round: under load a round holds
every request that arrived during the previous one (group commit across requests and across
partitions), and an idle store still writes a lone append at once.

A round writes each log's batches with one ``writev`` per segment and then fsyncs every log that
needs it (flush policy ``always``) concurrently on a small pool of sync threads, so the kernel can
fold the fdatasyncs of many partitions into one journal commit instead of paying for each in turn.
A log's failure fails only that log's appends; the others of the round complete.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Protocol

__all__ = ["CommitJob", "GroupCommitter", "JobOutcome", "RoundWriter"]

_SYNC_THREADS = 8

JobOutcome = BaseException | float | None
"""What a log's part of a round did: its exception, the seconds its fsync took, or None (no fsync)."""


class CommitJob(Protocol):
    """A log's part of one round, run in the writer thread."""

    def write(self) -> list[Callable[[], None]]:
        """Write the queued bytes; return the syncs the round must still run (empty: nothing to sync)."""


class RoundWriter(Protocol):
    """A log as the committer sees it."""

    def take_job(self) -> CommitJob | None:
        """Everything queued so far as one job (None: nothing queued); later appends wait for the next."""

    def finish_job(self, job: CommitJob, outcome: JobOutcome) -> None:
        """Back on the loop: complete (or fail) the job's appends."""


class GroupCommitter:
    """The store's single writer: rounds of writes and fsyncs across all of its logs."""

    def __init__(self, executor: Executor, *, sync_threads: int = _SYNC_THREADS) -> None:
        self._executor = executor
        self._sync_threads = sync_threads
        self._sync_pool: ThreadPoolExecutor | None = None
        self._waiting: dict[RoundWriter, None] = {}
        self._drainer: asyncio.Task[None] | None = None
        self.rounds = 0
        """Rounds written so far (tests and the bench read it)."""

    def request(self, writer: RoundWriter) -> None:
        """``writer`` has queued work: it joins the next round (a round starts at once when idle)."""
        self._waiting[writer] = None
        if self._drainer is None:
            self._drainer = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._waiting:
                writers, self._waiting = list(self._waiting), {}
                jobs: list[tuple[RoundWriter, CommitJob]] = []
                for writer in writers:
                    job = writer.take_job()
                    if job is not None:
                        jobs.append((writer, job))
                if not jobs:
                    continue
                try:
                    outcomes = await loop.run_in_executor(
                        self._executor, self._write_round, [job for _, job in jobs]
                    )
                except BaseException as exc:
                    for writer, job in jobs:
                        writer.finish_job(job, exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
                    if not isinstance(exc, Exception):
                        raise
                    continue
                self.rounds += 1
                for (writer, job), outcome in zip(jobs, outcomes, strict=True):
                    writer.finish_job(job, outcome)
        finally:
            self._drainer = None

    def _write_round(self, jobs: Sequence[CommitJob]) -> list[JobOutcome]:
        """In the writer thread: every job's writes in order, then every needed fsync concurrently."""
        outcomes: list[JobOutcome] = [None] * len(jobs)
        pending: list[tuple[int, list[Callable[[], None]]]] = []
        for index, job in enumerate(jobs):
            try:
                syncs = job.write()
            except Exception as exc:
                outcomes[index] = exc
                continue
            if syncs:
                pending.append((index, syncs))
        if len(pending) == 1 or self._sync_threads <= 1:
            for index, syncs in pending:
                outcomes[index] = _run_syncs(syncs)
        elif pending:
            pool = self._pool()
            futures = [(index, pool.submit(_run_syncs, syncs)) for index, syncs in pending]
            for index, future in futures:
                outcomes[index] = future.result()
        return outcomes

    def _pool(self) -> ThreadPoolExecutor:
        if self._sync_pool is None:
            self._sync_pool = ThreadPoolExecutor(self._sync_threads, thread_name_prefix="kcoord-fsync")
        return self._sync_pool

    def close(self) -> None:
        """Release the sync threads (the store's executor is the store's to shut down)."""
        if self._sync_pool is not None:
            self._sync_pool.shutdown(wait=True)
            self._sync_pool = None


def _run_syncs(syncs: list[Callable[[], None]]) -> BaseException | float:
    started = time.perf_counter()
    try:
        for sync in syncs:
            sync()
    except Exception as exc:
        return exc
    return time.perf_counter() - started
