"""Hot-path metrics kept as plain numbers on the event loop, exported by a collector at scrape time.

prometheus-client's ``Counter.inc`` and ``Histogram.observe`` take a lock on every call (its
``MutexValue``), and a profile of the heartbeat load put them at about a tenth of a heartbeat's
cost. The figures updated on every request (``kcoord_requests_total``,
``kcoord_request_duration_seconds``), on every commit (``kcoord_offset_commits_total``) and on
every log append and flush are only ever updated
from the event loop thread, so they need no lock: they are ints and lists here, and
:class:`LoopMetricsCollector` turns them into metric families when /metrics is read. The
exposition is the same as prometheus-client's own counters and histograms would give.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kcoord.protocol.errors import error_name

_VERSION_STRIDE = 1 << 12
"""``requests`` counts are keyed by ``version * stride + error + 1``: one int, no tuple per request."""


class LoopHistogram:
    """Bucket counts (not cumulative: the exporter sums them) and the sum of observed values."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative ``(le, count)`` pairs ending with ``+Inf``, as the exposition wants them."""
        cumulative = 0
        out: list[tuple[str, float]] = []
        for bound, count in zip((*self.bounds, float("inf")), list(self.counts), strict=True):
            cumulative += count
            out.append((floatToGoString(bound), cumulative))  # type: ignore[no-untyped-call]
        return out


class LoopCounter:
    """A counter bumped on the loop (``counter.value += n``, no call), exported as ``<name>_total``."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class ApiRequestStats:
    """One API's answered requests by (version, error) and its latency histogram."""

    __slots__ = ("counts", "latency")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.counts: dict[int, int] = {}
        self.latency = LoopHistogram(bounds)


class RequestStats:
    """Requests answered and their durations, per API; updated from the event loop only."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.by_api: dict[int, ApiRequestStats] = {}

    def observe(self, api_key: int, api_version: int, error: int, seconds: float) -> None:
        stats = self.by_api.get(api_key)
        if stats is None:
            stats = self.by_api[api_key] = ApiRequestStats(self._bounds)
        counts = stats.counts
        key = api_version * _VERSION_STRIDE + error + 1
        counts[key] = counts.get(key, 0) + 1
        latency = stats.latency
        latency.counts[bisect_left(latency.bounds, seconds)] += 1
        latency.total += seconds


class LoopMetricsCollector(Collector):
    """Exports :class:`RequestStats` and the log's histograms as prometheus-client families."""

    def __init__(
        self,
        requests: RequestStats,
        api_name: Callable[[int], str],
        histograms: dict[str, tuple[str, LoopHistogram]],
        counters: dict[str, tuple[str, LoopCounter]] | None = None,
    ) -> None:
        """``histograms``: metric name -> (help, histogram) for unlabelled histograms; ``counters`` the
        same for unlabelled counters (named without ``_total``, as prometheus-client's own)."""
        self._requests = requests
        self._api_name = api_name
        self._histograms = histograms
        self._counters = counters or {}

    def describe(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        yield from self._families(with_samples=False)

    def collect(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        yield from self._families(with_samples=True)

    def _families(self, *, with_samples: bool) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        requests = CounterMetricFamily(
            "kcoord_requests", "Requests answered.", labels=["api", "version", "error"]
        )
        duration = HistogramMetricFamily(
            "kcoord_request_duration_seconds", "Time from frame received to response ready.", labels=["api"]
        )
        if with_samples:
            for api_key, stats in list(self._requests.by_api.items()):
                name = self._api_name(api_key)
                for key, count in list(stats.counts.items()):
                    version, error = divmod(key, _VERSION_STRIDE)
                    requests.add_metric([name, str(version), error_name(error - 1)], count)
                latency = stats.latency
                duration.add_metric([name], latency.buckets(), latency.total)
        yield requests
        yield duration
        for metric, (text, histogram) in self._histograms.items():
            family = HistogramMetricFamily(metric, text)
            if with_samples:
                family.add_metric([], histogram.buckets(), histogram.total)
            yield family
        for metric, (text, counter) in self._counters.items():
            total = CounterMetricFamily(metric, text)
            if with_samples:
                total.add_metric([], counter.value)
            yield total
