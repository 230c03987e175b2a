"""Long work on the event loop cut into slices of a few milliseconds.

A round of topic creations applies, logs and announces a thousand topics, and a Metadata answer
describes as many: done in one go, that holds the loop for a few hundred milliseconds, and every
other connection's heartbeat waits. The work calls :meth:`LoopSlices.pause` between items; it yields
to the event loop once the current slice has run for its budget, so no slice holds the loop for much
longer than that.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["SLICE_BUDGET_S", "LoopSlices"]

SLICE_BUDGET_S = 0.002
"""How long one slice of work may hold the event loop before it yields."""


class LoopSlices:
    """Yields to the event loop whenever ``budget_s`` of work has run since the last yield."""

    __slots__ = ("_budget_s", "_started", "yields")

    def __init__(self, budget_s: float = SLICE_BUDGET_S) -> None:
        self._budget_s = budget_s
        self._started = time.perf_counter()
        self.yields = 0
        """How many times the work yielded so far."""

    async def pause(self) -> None:
        """Between two items of work: yield to the loop if this slice has spent its budget."""
        if time.perf_counter() - self._started < self._budget_s:
            return
        await asyncio.sleep(0)
        self.yields += 1
        self._started = time.perf_counter()
