"""Figures from a kcoord's ``/metrics``: per-API request latency buckets, their quantiles, and samples."""

from __future__ import annotations

import urllib.request


def scrape(metrics: str) -> str:
    """The text of ``http://<metrics>/metrics``."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as reply:
        return str(reply.read().decode())


def request_buckets(text: str, api: str) -> dict[float, float]:
    """One API's cumulative ``kcoord_request_duration_seconds`` buckets (upper bound s -> requests)."""
    series = f'kcoord_request_duration_seconds_bucket{{api="{api}",le="'
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith(series):
            bound, _, count = line[len(series) :].partition('"} ')
            buckets[float(bound)] = float(count)
    return buckets


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """Upper bound (s) of the bucket holding quantile ``q`` of the requests between two scrapes."""
    counts = sorted((bound, after[bound] - before.get(bound, 0.0)) for bound in after)
    if not counts or counts[-1][1] <= 0:
        return float("nan")
    wanted = q * counts[-1][1]
    return next(bound for bound, count in counts if count >= wanted)


def sample(text: str, name: str) -> float:
    """One sample's value, ``name`` with its labels as exposed (0 when the series does not exist yet)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def requests(text: str, api: str) -> float:
    """Requests of one API answered so far, every version and error code together."""
    series = f'kcoord_requests_total{{api="{api}",'
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(series))
