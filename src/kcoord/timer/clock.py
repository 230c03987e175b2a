"""Clocks for the coordinator: the system clock in production, a manual clock in tests.

Both report whole milliseconds since the epoch, because record timestamps (commit time, state
time) are epoch milliseconds and deadlines are compared with the same numbers.
"""

from __future__ import annotations

import time


class SystemClock:
    """Wall-clock milliseconds that never run backwards.

    Record timestamps must be wall time, so the reading is ``time.time()``; but a deadline
    computed from one reading must not be reached *later* because the wall clock stepped back
    (NTP, a VM resume), so a reading below the previous one is held at the previous one.
    A forward step still makes pending deadlines fire early; that is the price of wall time.
    """

    __slots__ = ("_last_ms",)

    def __init__(self) -> None:
        self._last_ms = 0

    def now_ms(self) -> int:
        now = time.time_ns() // 1_000_000
        if now < self._last_ms:
            return self._last_ms
        self._last_ms = now
        return now


class ManualClock:
    """A clock that moves only when a test moves it."""

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, delta_ms: int) -> int:
        """Move the clock forward by ``delta_ms`` and return the new time."""
        if delta_ms < 0:
            raise ValueError(f"a manual clock only moves forward (asked for {delta_ms} ms)")
        self._now_ms += delta_ms
        return self._now_ms

    def set(self, now_ms: int) -> int:
        """Jump to ``now_ms`` (forward only) and return it."""
        if now_ms < self._now_ms:
            raise ValueError(f"a manual clock only moves forward ({now_ms} < {self._now_ms})")
        self._now_ms = now_ms
        return now_ms
