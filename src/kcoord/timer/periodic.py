"""A background pass on the running loop every so many seconds: log retention and compaction,
producer-state snapshots, the shared-state poll.

Each owner hands in the pass; this module owns the task: it sleeps first, runs the pass, logs a
failing pass under the owner's event name and runs the next one anyway, and :meth:`stop` cancels
the task and waits for it to end. (The timing wheel's driver is not a fixed period; it is in
:mod:`kcoord.runtime.timer_driver`.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field

import structlog

__all__ = ["PeriodicTask"]

logger = structlog.get_logger(__name__)


@dataclass(eq=False)
class PeriodicTask:
    """Awaits ``run_pass`` every ``interval_s`` until stopped; a pass that raises is logged as
    ``failure_event``, not fatal. An interval of 0 or less never starts."""

    run_pass: Callable[[], Awaitable[object]]
    interval_s: float
    _: KW_ONLY
    failure_event: str
    task_name: str | None = None
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    def start(self) -> None:
        if self._task is None and self.interval_s > 0:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.task_name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.run_pass()
            except Exception:
                logger.exception(self.failure_event)
