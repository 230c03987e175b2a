"""What /metrics carries: counters and histograms without ``_created`` series."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from kcoord.observability.metrics import KcoordMetrics
from kcoord.protocol.api_keys import ApiKey


def test_counters_and_histograms_export_no_created_samples() -> None:
    """After requests, rebalances and appends are counted, no sample name ends in ``_created``."""
    metrics = KcoordMetrics()
    metrics.observe_request(int(ApiKey.METADATA), 12, 0, 0.001)
    metrics.rebalances.labels(trigger="initial").inc()
    metrics.on_append("t", 0, 100, 0.0001)
    names = [
        sample.name
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
    ]
    assert "kcoord_requests_total" in names and "kcoord_rebalances_total" in names
    assert [name for name in names if name.endswith("_created")] == []
