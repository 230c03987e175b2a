"""The asyncio shell around the timing wheel: sleep until something can be due, then report it.

The driver is the :class:`~kcoord.timer.api.Timer` the coordinator is given. It owns a wheel
and a clock; ``schedule``/``cancel`` go straight to the wheel, and only a deadline *earlier*
than the one the driver is sleeping towards wakes it to re-arm, so a heartbeat that moves a
session deadline later costs nothing here either. When keys expire the driver calls
``on_expired(keys)``; the coordinator shard turns them into events on its own runner.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog

from kcoord.timer.api import Clock
from kcoord.timer.wheel import TimingWheel

__all__ = ["TimerDriver"]

_log = structlog.get_logger(__name__)


class TimerDriver:
    """Runs a :class:`TimingWheel` against a clock on the event loop.

    Give it a wheel whose ``start_ms`` is the clock's current time (or use :meth:`for_clock`);
    a wheel started at 0 still works but first walks its cursor up to the present.
    """

    def __init__(self, wheel: TimingWheel, clock: Clock, on_expired: Callable[[list[str]], None]) -> None:
        self._wheel = wheel
        self._clock = clock
        self._on_expired = on_expired
        self._armed_for_ms: int | None = None
        self._rearm = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def for_clock(
        cls, clock: Clock, on_expired: Callable[[list[str]], None], *, tick_ms: int = 10
    ) -> TimerDriver:
        """A driver with a fresh wheel whose cursor starts at the clock's current time."""
        return cls(TimingWheel(start_ms=clock.now_ms(), tick_ms=tick_ms), clock, on_expired)

    @property
    def running(self) -> bool:
        """True between ``start`` and ``stop``."""
        return self._task is not None and not self._task.done()

    def schedule(self, key: str, deadline_ms: int) -> None:
        """Set or move the deadline of ``key``; wakes the driver only if it must wake earlier."""
        self._wheel.schedule(key, deadline_ms)
        if self._armed_for_ms is None or deadline_ms < self._armed_for_ms:
            self._rearm.set()

    def cancel(self, key: str) -> None:
        """Forget ``key``; a no-op when it has no deadline."""
        self._wheel.cancel(key)

    def deadline(self, key: str) -> int | None:
        """The current deadline of ``key``, or None."""
        return self._wheel.deadline(key)

    def start(self) -> None:
        """Start the driver task on the running loop."""
        if self.running:
            raise RuntimeError("the timer driver is already running")
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kcoord-timer-driver")

    async def stop(self) -> None:
        """Stop the driver and wait for its task to end; pending deadlines stay in the wheel."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while True:
            expired = self._wheel.advance(self._clock.now_ms())
            if expired:
                self._deliver(expired)
            self._rearm.clear()
            wake_ms = self._wheel.next_wakeup_ms()
            self._armed_for_ms = wake_ms
            if wake_ms is None:
                await self._rearm.wait()
                continue
            delay_s = max(0, wake_ms - self._clock.now_ms()) / 1000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay_s):
                    await self._rearm.wait()

    def _deliver(self, expired: list[str]) -> None:
        """Hand keys to the owner; a failing callback is logged and does not stop the timers."""
        try:
            self._on_expired(expired)
        except Exception:
            _log.exception("timer_callback_failed", keys=len(expired))
