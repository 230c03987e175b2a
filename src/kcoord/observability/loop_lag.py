"""How long the event loop was held: a callback due every few milliseconds, and how late it ran.

Anything that holds the loop (a round of topic creations applied in one go, a large answer built
without yielding, a garbage collection of a large heap) delays every connection's requests by as
much; the probe sees the same delay as lateness. On a shared machine lateness also comes from the
process not being scheduled at all, so each lateness is also counted as "busy": the part of it the
process spent on a CPU (its CPU time over the same interval, all threads: the loop's own work, a
collection, or another thread holding the interpreter lock), which a starved process does not
accumulate. Exported as ``kcoord_event_loop_lag_seconds`` and ``kcoord_event_loop_busy_lag_seconds``
(histograms) and ``kcoord_event_loop_lag_max_seconds`` and ``kcoord_event_loop_busy_lag_max_seconds``
(the longest since the node started).
"""

from __future__ import annotations

import asyncio
import time

from kcoord.observability.loop_metrics import LoopHistogram

__all__ = ["LAG_BUCKETS", "LoopLagProbe"]

LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
PROBE_INTERVAL_S = 0.01


class LoopLagProbe:
    """Schedules a callback every ``interval_s`` on the running loop and records how late each ran."""

    def __init__(self, interval_s: float = PROBE_INTERVAL_S) -> None:
        self._interval_s = interval_s
        self.lag = LoopHistogram(LAG_BUCKETS)
        self.busy_lag = LoopHistogram(LAG_BUCKETS)
        self.longest_s = 0.0
        self.longest_busy_s = 0.0
        self._due = 0.0
        self._cpu_at_schedule = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Start probing the running loop (again after :meth:`stop`; a second start is ignored)."""
        if self._handle is None:
            self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self) -> None:
        self._due = time.monotonic() + self._interval_s
        self._cpu_at_schedule = time.process_time()
        self._handle = asyncio.get_running_loop().call_later(self._interval_s, self._tick)

    def _tick(self) -> None:
        late = max(0.0, time.monotonic() - self._due)
        busy = min(late, time.process_time() - self._cpu_at_schedule)
        self.lag.observe(late)
        self.busy_lag.observe(busy)
        self.longest_s = max(self.longest_s, late)
        self.longest_busy_s = max(self.longest_busy_s, busy)
        self._schedule()
