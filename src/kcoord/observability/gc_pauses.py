"""How long the cyclic garbage collector held the process: each collection's pause, by generation.

A collection stops every thread of the interpreter while it walks the tracked objects of its
generation and the younger ones, so a full (generation 2) pass over a large heap delays every
connection as much as a loop-bound handler would, and the loop-lag probe
(:mod:`kcoord.observability.loop_lag`) shows it only as a lateness of unknown cause. This probe is a
``gc.callbacks`` entry timing each collection from its ``start`` to its ``stop`` phase. Exported as
``kcoord_gc_pause_seconds`` (a histogram, label ``generation``: the oldest generation collected) and
``kcoord_gc_pause_max_seconds`` (the longest since the probe started, by generation), and
``kcoord_gc_pause_busy_max_seconds``: the longest "busy" pause, the part of a pause the process spent
on a CPU (its CPU time over the pause, all threads, as the loop-lag probe counts it). On a loaded
machine a collection's wall-clock pause also holds the time the process was not scheduled: in
``bench/run.py metadata_flood`` on a busy box, a 204 ms pause had 2.4 ms of CPU. How many
objects :mod:`kcoord.cli.gc_tuning` froze is not exported: CPython 3.11 counts them by walking the
list (``gc.get_freeze_count``), a pause of its own at a large heap.

The collector is process-wide: a process running several nodes (tests) counts every collection in
each node's probe. Collections never overlap (CPython runs one at a time, whichever thread triggers
it), so the callback's updates need no lock.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from kcoord.observability.loop_metrics import LoopHistogram

__all__ = ["GC_PAUSE_BUCKETS", "GcPauseCollector", "GcPauseProbe"]

GC_PAUSE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
GENERATIONS = 3


class GcPauseProbe:
    """Times every collection of the process while started (see the module docstring)."""

    def __init__(self) -> None:
        self.pauses = tuple(LoopHistogram(GC_PAUSE_BUCKETS) for _ in range(GENERATIONS))
        """One histogram per generation, indexed by it."""
        self.longest_s = [0.0] * GENERATIONS
        self.longest_busy_s = [0.0] * GENERATIONS
        self._started_at = 0.0
        self._cpu_at_start = 0.0

    def start(self) -> None:
        """Time every collection from now on (a second start is ignored)."""
        if self._on_collection not in gc.callbacks:
            gc.callbacks.append(self._on_collection)

    def stop(self) -> None:
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started_at = time.perf_counter()
            self._cpu_at_start = time.process_time()
            return
        generation = info["generation"]
        pause = time.perf_counter() - self._started_at
        busy = min(pause, time.process_time() - self._cpu_at_start)
        self.pauses[generation].observe(pause)
        if pause > self.longest_s[generation]:
            self.longest_s[generation] = pause
        if busy > self.longest_busy_s[generation]:
            self.longest_busy_s[generation] = busy


class GcPauseCollector(Collector):
    """Exports a :class:`GcPauseProbe` at scrape time."""

    def __init__(self, probe: GcPauseProbe) -> None:
        self._probe = probe

    def describe(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        yield from self._families(with_samples=False)

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        yield from self._families(with_samples=True)

    def _families(self, *, with_samples: bool) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        pauses = HistogramMetricFamily(
            "kcoord_gc_pause_seconds",
            "How long each garbage collection held the process, by the oldest generation it collected.",
            labels=["generation"],
        )
        longest = GaugeMetricFamily(
            "kcoord_gc_pause_max_seconds",
            "The longest garbage collection pause since the node started, by generation.",
            labels=["generation"],
        )
        longest_busy = GaugeMetricFamily(
            "kcoord_gc_pause_busy_max_seconds",
            "The longest part of a garbage collection pause the process spent on a CPU, by generation.",
            labels=["generation"],
        )
        if with_samples:
            probe = self._probe
            for generation, histogram in enumerate(probe.pauses):
                pauses.add_metric([str(generation)], histogram.buckets(), histogram.total)
                longest.add_metric([str(generation)], probe.longest_s[generation])
                longest_busy.add_metric([str(generation)], probe.longest_busy_s[generation])
        yield pauses
        yield longest
        yield longest_busy
