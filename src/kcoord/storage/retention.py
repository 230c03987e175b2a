"""The background task that applies retention every ``log.retention.check.interval.ms``.

The log cleaner runs on the same loop, named "cleaner", every ``log.cleaner.backoff.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

__all__ = ["RetentionLoop"]

logger = structlog.get_logger(__name__)


class RetentionLoop:
    """Calls ``enforce`` every ``interval_ms`` until stopped; a failing pass is logged, not fatal."""

    def __init__(
        self, enforce: Callable[[], Awaitable[int]], interval_ms: int, *, name: str = "retention"
    ) -> None:
        self._enforce = enforce
        self._interval_ms = interval_ms
        self._name = name
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self._interval_ms > 0:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"kcoord-log-{self._name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_ms / 1000)
            try:
                await self._enforce()
            except Exception:
                logger.exception(f"log.{self._name}_failed")
