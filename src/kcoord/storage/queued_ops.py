"""What an engine's log queues for its writer: a batch to write, a segment roll, and the queue itself.

Shared by the engines that hand appends to a writer (file, postgresql): each adds its own
operations (the file engine a flush) to these two, and mixes in :class:`QueuedWriter`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kcoord.storage.segment import Placement, Segment

_Op = TypeVar("_Op")


@dataclass(slots=True)
class QueuedWrite:
    """A batch to write at ``placement`` of ``segment``; ``done`` resolves once it is visible."""

    segment: Segment
    data: bytes
    placement: Placement
    done: asyncio.Future[None]
    started: float = 0.0
    """``time.perf_counter()`` when queued, for engines that time appends themselves (0: untimed)."""
    on_written: Callable[[asyncio.Future[None]], None] | None = None
    """Called with ``done`` once it is done, by engines that call it themselves (no loop callback)."""


@dataclass(slots=True)
class QueuedRoll:
    """``old`` is sealed (with its last time-index entry) and ``new`` becomes the active segment."""

    old: Segment
    new: Segment
    seal_entry: tuple[int, int] | None


class RoundRequests(Protocol):
    """The writer a log asks for a round (:meth:`kcoord.storage.commit_rounds.CommitRounds.request`)."""

    def request(self, log: Any) -> None: ...


class QueuedWriter(Generic[_Op]):
    """The queue a log hands its writer: operations wait in ``_queue`` until the writer's next round
    takes them all as one job, and :meth:`_idle` returns once none is queued or in a round.

    Mixed into an engine's log before :class:`~kcoord.storage.log.SegmentedLog`; the log sets the
    attributes below and counts its jobs in ``_jobs_in_flight`` its own way (any value true while
    a job is in a round).
    """

    _queue: list[_Op]
    _committer: RoundRequests
    _jobs_in_flight: object
    _idle_waiters: list[asyncio.Future[None]]

    def _enqueue(self, op: _Op) -> None:
        self._queue.append(op)
        self._committer.request(self)

    def _take_queued(self) -> list[_Op] | None:
        """Everything queued, now handed to a job (None: nothing is queued)."""
        if not self._queue:
            return None
        ops, self._queue = self._queue, []
        return ops

    def _wake_if_idle(self) -> None:
        """After a job finished: wake :meth:`_idle`'s waiters when nothing is queued or in flight."""
        if not self._jobs_in_flight and not self._queue:
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def _idle(self) -> None:
        while self._queue or self._jobs_in_flight:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await asyncio.shield(waiter)
