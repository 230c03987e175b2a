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

A full (generation 2) collection walks every tracked object, so its pause grows with the heap:
at 10,000 members (about 160 MB) ``bench/run.py members_scale`` measured heartbeat p99 311 ms and
max 516 ms with the collector on, 21 ms and 47 ms with it off: the pauses were the tail. So after
each full collection the survivors are frozen (``gc.freeze``: moved to a generation the collector
no longer walks), and the next full collection walks only what was allocated since. Frozen objects
are still freed by reference counting; only a reference cycle among them would outlive its use,
so every :data:`UNFREEZE_EVERY`-th full collection unfreezes first and walks the whole heap once.
"""

from __future__ import annotations

import gc

__all__ = ["SERVING_THRESHOLDS", "tune_for_serving"]

SERVING_THRESHOLDS = (10_000, 10, 10)
"""Young-generation threshold raised; the older generations keep CPython's ratios."""
UNFREEZE_EVERY = 32
"""Full collections between two that walk the whole heap (frozen objects included)."""


class _FreezeAfterFullCollections:
    """A ``gc.callbacks`` entry: freezes the survivors of full collections (module docstring)."""

    def __init__(self) -> None:
        self.full_collections = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start" and self.full_collections % UNFREEZE_EVERY == UNFREEZE_EVERY - 1:
            gc.unfreeze()  # this one walks everything, so cycles among old objects are found
        elif phase == "stop":
            self.full_collections += 1
            gc.freeze()


def tune_for_serving() -> None:
    """Set :data:`SERVING_THRESHOLDS` and freeze the survivors of full collections (process-wide:
    only the process that serves calls this)."""
    gc.set_threshold(*SERVING_THRESHOLDS)
    if not any(isinstance(callback, _FreezeAfterFullCollections) for callback in gc.callbacks):
        gc.callbacks.append(_FreezeAfterFullCollections())
