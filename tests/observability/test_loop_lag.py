"""The loop-lag probe: a callback held up by work on the loop counts as lag, and the figures reach
/metrics as ``kcoord_event_loop_lag_seconds`` and ``kcoord_event_loop_lag_max_seconds``."""

from __future__ import annotations

import asyncio
import time

from prometheus_client.parser import text_string_to_metric_families

from kcoord.observability.metrics import KcoordMetrics


def _hold_the_loop(seconds: float) -> None:
    """Blocking work on the loop's thread, as a long callback would be."""
    time.sleep(seconds)


async def test_a_blocked_loop_shows_as_the_longest_lag_and_in_the_histogram() -> None:
    """Holding the loop for 80 ms makes the probe's next callback at least 60 ms late: its longest
    lag and the exported histogram and gauge say so."""
    metrics = KcoordMetrics()
    metrics.loop_lag.start()
    try:
        await asyncio.sleep(0.03)
        _hold_the_loop(0.08)
        await asyncio.sleep(0.03)
    finally:
        metrics.loop_lag.stop()
    assert metrics.loop_lag.longest_s >= 0.06
    samples = {
        (sample.name, sample.labels.get("le")): sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
        if sample.name.startswith("kcoord_event_loop_lag")
    }
    assert samples[("kcoord_event_loop_lag_max_seconds", None)] == metrics.loop_lag.longest_s
    count = samples[("kcoord_event_loop_lag_seconds_count", None)]
    assert count >= 3
    assert count - samples[("kcoord_event_loop_lag_seconds_bucket", "0.05")] >= 1


async def test_a_stopped_probe_schedules_nothing() -> None:
    """After stop() the probe's histogram no longer grows."""
    metrics = KcoordMetrics()
    metrics.loop_lag.start()
    await asyncio.sleep(0.05)
    metrics.loop_lag.stop()
    counted = sum(metrics.loop_lag.lag.counts)
    await asyncio.sleep(0.05)
    assert counted >= 1 and sum(metrics.loop_lag.lag.counts) == counted
