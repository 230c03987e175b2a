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
max 516 ms with the collector on, 21 ms and 47 ms with it off: the pauses were the tail. Freezing
the survivors of each full collection (``gc.freeze``: moved to a generation the collector no
longer walks) was not enough where the heap grows fast: a Metadata request naming 100,000 new
topics (``bench/run.py metadata_flood``) builds about 1.1 million tracked objects (the catalogue's
topics, their logs and configs), and CPython 3.11 holds a full collection back until a quarter of
the old generation is new, so each full pass walked the hundreds of thousands of objects that had
reached the old generation since the last: five pauses of 50-136 ms of CPU per flood (measured with
a ``gc.callbacks`` timer), each a stall of every connection. So the survivors of every
middle-generation collection are frozen too: an object that lived through a middle-generation pass
is most likely kept as long as the catalogue or the group it belongs to, and the old generation
stays empty. Every collection then walks at most the young and middle
generations, which the thresholds bound whatever the size of the heap: the middle generation holds
the survivors of at most three young collections (CPython's ten let it reach 33-44 ms of CPU per
pass in the flood: each young collection there keeps most of a round's new topics).

Frozen objects are still freed by reference counting; only a reference cycle among them would
outlive its use. So the whole heap is walked now and then: a full collection unfreezes first once
:data:`WHOLE_HEAP_EVERY` full collections and :data:`WHOLE_HEAP_INTERVAL_S` seconds have passed
since the last whole-heap walk (the first such walk after the start included). The count keeps
a quiet node (few collections) from walking a large heap for nothing; the interval keeps a node
whose heap grows fast (a flood of new topics) from paying a walk of its whole heap (roughly 0.3 s
of CPU per million objects on the 2-core test box) more than once per interval. What a
cycle of frozen objects holds is the most that waits for that walk (a test churns topics and
groups under this tuning and sees the memory come back).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

__all__ = ["SERVING_THRESHOLDS", "WHOLE_HEAP_EVERY", "WHOLE_HEAP_INTERVAL_S", "tune_for_serving"]

SERVING_THRESHOLDS = (10_000, 3, 10)
"""Young-generation threshold raised; a middle-generation collection every third young one (CPython: every
tenth), which bounds what it walks (module docstring); full collections keep CPython's ratio."""
WHOLE_HEAP_EVERY = 32
"""Full collections between two that walk the whole heap (frozen objects included), at least."""
WHOLE_HEAP_INTERVAL_S = 300.0
"""Seconds between two whole-heap walks, at least."""


class _FreezeSurvivors:
    """A ``gc.callbacks`` entry: freezes what survives the middle and old generations' collections,
    and unfreezes before the full collection that is due to walk the whole heap (module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.full_collections = 0
        """Full collections since the last whole-heap walk."""
        self.whole_heap_walks = 0
        self._last_walk = clock()

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        generation = info.get("generation", 0)
        if generation == 0:
            return
        if phase == "start":
            if generation == 2 and self._whole_heap_due():
                gc.unfreeze()  # this one walks everything, so cycles among old objects are found
                self.full_collections = 0
                self.whole_heap_walks += 1
                self._last_walk = self._clock()
            return
        if generation == 2:
            self.full_collections += 1
        gc.freeze()

    def _whole_heap_due(self) -> bool:
        return (
            self.full_collections + 1 >= WHOLE_HEAP_EVERY
            and self._clock() - self._last_walk >= WHOLE_HEAP_INTERVAL_S
        )


def tune_for_serving() -> None:
    """Set :data:`SERVING_THRESHOLDS` and freeze the survivors of the older generations' collections
    (process-wide: only the process that serves calls this)."""
    gc.set_threshold(*SERVING_THRESHOLDS)
    if not any(isinstance(callback, _FreezeSurvivors) for callback in gc.callbacks):
        gc.callbacks.append(_FreezeSurvivors())
