"""What both engines' group commit share: logs ask for a round, one drain task runs rounds while any
log has work queued.

A log that queues work calls :meth:`CommitRounds.request`; the drain task (started at once when idle)
takes every waiting log's job and hands them all to the engine's :meth:`CommitRounds._run_round`
(:mod:`kcoord.storage.group_commit` for files, :mod:`kcoord.storage.postgres.committer` for
PostgreSQL). Logs that queue more while a round is in flight wait for the next one.
"""

from __future__ import annotations

import asyncio
from typing import Generic, Protocol, TypeVar

__all__ = ["CommitRounds", "RoundParticipant"]

_Job = TypeVar("_Job")
_Outcome = TypeVar("_Outcome", contravariant=True)
_RoundOutcome = TypeVar("_RoundOutcome")


class RoundParticipant(Protocol[_Job, _Outcome]):
    """A log as the committer sees it."""

    def take_job(self) -> _Job | None:
        """Everything queued so far as one job (None: nothing queued); later appends wait for the next."""

    def finish_job(self, job: _Job, outcome: _Outcome) -> None:
        """Back on the loop: complete (or fail) the job's appends."""


class CommitRounds(Generic[_Job, _RoundOutcome]):
    """The waiting logs and the drain task of one store's single writer."""

    def __init__(self) -> None:
        self._waiting: dict[RoundParticipant[_Job, _RoundOutcome], None] = {}
        self._drainer: asyncio.Task[None] | None = None
        self.rounds = 0
        """Rounds written so far (tests and the bench read it)."""

    def request(self, log: RoundParticipant[_Job, _RoundOutcome]) -> None:
        """``log`` has queued work: it joins the next round (a round starts at once when idle)."""
        self._waiting[log] = None
        if self._drainer is None:
            self._drainer = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._waiting:
                logs, self._waiting = list(self._waiting), {}
                jobs = [(log, job) for log in logs if (job := log.take_job()) is not None]
                if jobs:
                    await self._run_round(jobs)
        finally:
            self._drainer = None

    async def _run_round(self, jobs: list[tuple[RoundParticipant[_Job, _RoundOutcome], _Job]]) -> None:
        """Write one round and finish every job of it (counting it in :attr:`rounds` if written)."""
        raise NotImplementedError
