"""The cyclic garbage collector's thresholds for a serving process (``kcoord serve``).

CPython collects the young generation whenever container allocations outnumber deallocations by
700. A server at depth 1 with a few dozen connections keeps several hundred short-lived objects
in flight at any moment (request, context, sink, result, records, response), so that count crosses
700 every few dozen requests, and each pass walks objects that reference counting frees a moment
later; every tenth pass also walks the middle generation. Measured in process on the OffsetCommit
path (``bench/run.py commit_path``, 50 callers): one collection per ~50 commits, 10-15 us of a
commit's ~65 us of event-loop CPU. With the young threshold at 10,000 the same load triggers
none, because in steady state what a request allocates it also frees; a collection still comes
once the live heap really grows by that much (a few MB of small objects at most).
"""

from __future__ import annotations

import gc

__all__ = ["SERVING_THRESHOLDS", "tune_for_serving"]

SERVING_THRESHOLDS = (10_000, 10, 10)
"""Young-generation threshold raised; the older generations keep CPython's ratios."""


def tune_for_serving() -> None:
    """Set :data:`SERVING_THRESHOLDS` (process-wide: only the process that serves calls this)."""
    gc.set_threshold(*SERVING_THRESHOLDS)
