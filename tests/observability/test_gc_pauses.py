"""The garbage-collection pause probe: each collection of the process is timed by its generation, and the
figures reach /metrics."""

from __future__ import annotations

import gc

from prometheus_client.parser import text_string_to_metric_families

from kcoord.observability.metrics import KcoordMetrics


def _gc_samples(metrics: KcoordMetrics) -> dict[tuple[str, str, str | None], float]:
    return {
        (sample.name, sample.labels["generation"], sample.labels.get("le")): sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
        if sample.name.startswith("kcoord_gc_pause")
    }


def test_each_collection_is_timed_under_its_generation_and_exported() -> None:
    """Two full collections and one of the middle generation while the probe runs: counted under
    generations 2 and 1, with their summed and longest pauses (wall-clock, and the busy part no longer),
    as histograms and gauges."""
    metrics = KcoordMetrics()
    probe = metrics.gc_pauses
    probe.start()
    try:
        keep = [[index] for index in range(20_000)]
        gc.collect()
        gc.collect()
        gc.collect(1)
    finally:
        probe.stop()
    assert len(keep) == 20_000
    samples = _gc_samples(metrics)
    assert samples[("kcoord_gc_pause_seconds_count", "2", None)] >= 2
    assert samples[("kcoord_gc_pause_seconds_count", "1", None)] >= 1
    assert (
        samples[("kcoord_gc_pause_seconds_bucket", "2", "+Inf")]
        == samples[("kcoord_gc_pause_seconds_count", "2", None)]
    )
    longest = samples[("kcoord_gc_pause_max_seconds", "2", None)]
    assert longest == probe.longest_s[2] > 0
    busy = samples[("kcoord_gc_pause_busy_max_seconds", "2", None)]
    assert busy == probe.longest_busy_s[2] <= longest
    assert samples[("kcoord_gc_pause_seconds_sum", "2", None)] >= longest


def test_a_stopped_probe_times_nothing() -> None:
    """After stop() the probe is no longer a gc callback and its histograms no longer grow."""
    metrics = KcoordMetrics()
    probe = metrics.gc_pauses
    probe.start()
    probe.start()
    gc.collect()
    probe.stop()
    counted = [sum(histogram.counts) for histogram in probe.pauses]
    gc.collect()
    assert counted[2] == 1
    assert [sum(histogram.counts) for histogram in probe.pauses] == counted
    assert all(getattr(callback, "__self__", None) is not probe for callback in gc.callbacks)
