"""The loop-kept request metrics export exactly what prometheus-client's own Counter and Histogram would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.observability.metrics import KcoordMetrics
from kcoord.protocol.errors import error_name

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
API_NAMES = {3: "Metadata", 8: "OffsetCommit", 12: "Heartbeat"}

observations = st.lists(
    st.tuples(
        st.sampled_from(sorted(API_NAMES)),
        st.integers(0, 12),
        st.sampled_from([0, -1, 27, 25, 79]),
        st.one_of(st.sampled_from(BUCKETS), st.floats(0, 60, allow_nan=False)),
    ),
    max_size=40,
)


def _samples(exposition: bytes, prefix: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition.decode())
        for sample in family.samples
        if sample.name.startswith(prefix)
    }


@settings(max_examples=60, deadline=None)
@given(observations)
def test_request_counts_and_durations_match_prometheus_clients_own(
    seen: list[tuple[int, int, int, float]],
) -> None:
    """For any requests observed, kcoord_requests_total and the duration histogram equal the library's."""
    metrics = KcoordMetrics()
    reference = CollectorRegistry()
    counter = Counter("kcoord_requests", "x", ["api", "version", "error"], registry=reference)
    histogram = Histogram(
        "kcoord_request_duration_seconds", "x", ["api"], buckets=BUCKETS, registry=reference
    )
    for api_key, version, error, seconds in seen:
        metrics.observe_request(api_key, version, error, seconds)
        counter.labels(API_NAMES[api_key], str(version), error_name(error)).inc()
        histogram.labels(API_NAMES[api_key]).observe(seconds)
    ours = metrics.exposition()
    theirs = generate_latest(reference)
    for prefix in ("kcoord_requests_total", "kcoord_request_duration_seconds"):
        expected = {k: v for k, v in _samples(theirs, prefix).items() if not k[0].endswith("_created")}
        got = _samples(ours, prefix)
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            assert abs(got[key] - value) <= 1e-9 * max(1.0, abs(value)), key


def test_log_histograms_count_appends_and_flushes() -> None:
    """on_append and on_flush land in the log append and flush histograms' count and sum."""
    metrics = KcoordMetrics()
    metrics.on_append("t", 0, 100, 0.002)
    metrics.on_append("t", 0, 100, 0.004)
    metrics.on_flush("t", 0, 0.003)
    samples = _samples(metrics.exposition(), "kcoord_log_")
    assert samples[("kcoord_log_append_duration_seconds_count", ())] == 2
    assert abs(samples[("kcoord_log_append_duration_seconds_sum", ())] - 0.006) < 1e-12
    assert samples[("kcoord_log_flush_duration_seconds_bucket", (("le", "0.005"),))] == 1
    assert samples[("kcoord_log_flush_duration_seconds_bucket", (("le", "0.0025"),))] == 0


def test_offset_commit_count_matches_prometheus_clients_own_counter() -> None:
    """kcoord_offset_commits, kept on the loop, is exported as the library's own Counter (less _created)."""
    metrics = KcoordMetrics()
    reference = CollectorRegistry()
    counter = Counter("kcoord_offset_commits", "x", registry=reference)
    for committed in (1, 3, 0, 2):
        metrics.offset_commits.value += committed
        counter.inc(committed)
    ours = metrics.exposition()
    theirs = generate_latest(reference)
    prefix = "kcoord_offset_commits"
    expected = {k: v for k, v in _samples(theirs, prefix).items() if not k[0].endswith("_created")}
    assert _samples(ours, prefix) == expected == {("kcoord_offset_commits_total", ()): 6.0}
    assert b"# TYPE kcoord_offset_commits_total counter\n" in ours
