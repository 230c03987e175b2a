"""The loop-lag probe: a callback held up by work on the loop counts as lag (and as busy lag when the
process spent that time on a CPU), and the figures reach /metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from kcoord.observability.metrics import KcoordMetrics


def _compute_for(seconds: float) -> None:
    """Work on the loop's thread that uses ``seconds`` of CPU, as a long callback would."""
    deadline = time.process_time() + seconds
    while time.process_time() < deadline:
        sum(range(1000))


def _sleep_for(seconds: float) -> None:
    """A hold of the loop's thread that uses no CPU, as a process the machine does not schedule."""
    time.sleep(seconds)


async def _probed(hold: Callable[[float], None]) -> KcoordMetrics:
    metrics = KcoordMetrics()
    metrics.loop_lag.start()
    try:
        await asyncio.sleep(0.03)
        hold(0.08)
        await asyncio.sleep(0.03)
    finally:
        metrics.loop_lag.stop()
    return metrics


def _lag_samples(metrics: KcoordMetrics) -> dict[tuple[str, str | None], float]:
    return {
        (sample.name, sample.labels.get("le")): sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
        if sample.name.startswith("kcoord_event_loop_")
    }


async def test_a_loop_held_by_work_shows_as_lag_and_busy_lag() -> None:
    """Computing on the loop for 80 ms of CPU makes the probe's next callback at least 60 ms late, all of it
    busy: the longest figures, the histograms and the gauges say so."""
    metrics = await _probed(_compute_for)
    probe = metrics.loop_lag
    assert probe.longest_s >= 0.06 and probe.longest_busy_s >= 0.05
    samples = _lag_samples(metrics)
    assert samples[("kcoord_event_loop_lag_max_seconds", None)] == probe.longest_s
    assert samples[("kcoord_event_loop_busy_lag_max_seconds", None)] == probe.longest_busy_s
    for histogram in ("kcoord_event_loop_lag_seconds", "kcoord_event_loop_busy_lag_seconds"):
        count = samples[(f"{histogram}_count", None)]
        assert count >= 3
        assert count - samples[(f"{histogram}_bucket", "0.025")] >= 1


async def test_a_loop_held_without_cpu_shows_as_lag_but_not_busy_lag() -> None:
    """A thread that sleeps for 80 ms (as a process the machine does not schedule) delays the probe by
    at least 60 ms, but almost none of it counts as busy."""
    probe = (await _probed(_sleep_for)).loop_lag
    assert probe.longest_s >= 0.06
    assert probe.longest_busy_s < 0.03


async def test_a_stopped_probe_schedules_nothing() -> None:
    """After stop() the probe's histogram no longer grows."""
    metrics = KcoordMetrics()
    metrics.loop_lag.start()
    await asyncio.sleep(0.05)
    metrics.loop_lag.stop()
    counted = sum(metrics.loop_lag.lag.counts)
    await asyncio.sleep(0.05)
    assert counted >= 1 and sum(metrics.loop_lag.lag.counts) == counted
