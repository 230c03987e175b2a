"""The narrow interface the coordinator core uses to ask for deadlines.

Deadlines are keyed by a string (``"session:<group>:<member>"`` and so on). Scheduling a key
that already has a deadline *moves* it: the wheel keeps the slot it already has and re-checks
the key's current deadline when that slot fires, so a heartbeat that pushes a session deadline
forward costs a dictionary update, not a timer allocation.
"""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    """Milliseconds since the epoch; tests pass a manual clock they advance themselves."""

    def now_ms(self) -> int: ...


class Timer(Protocol):
    """Keyed deadlines. When a deadline passes, the owner is told the key (never a callback)."""

    def schedule(self, key: str, deadline_ms: int) -> None:
        """Set or move the deadline of ``key``."""

    def cancel(self, key: str) -> None:
        """Forget ``key``; a no-op when it has no deadline."""

    def deadline(self, key: str) -> int | None:
        """The current deadline of ``key``, or None."""
