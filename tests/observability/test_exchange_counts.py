"""The exchange observer on the hot path: cached encoded OffsetCommit answers are counted on every
request (their count kept by their bytes), APIs it does not count are ignored, and an unreadable
shape never fails a request."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kcoord.coordinator.offsets import (
    OffsetCommitPartitionResult,
    OffsetCommitResponse,
    OffsetCommitTopicResult,
)
from kcoord.observability.metrics import KcoordMetrics
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.response_cache import ResponseCache


def _answer(cache: ResponseCache, codes: tuple[ErrorCode, ...]) -> object:
    """An OffsetCommit answer for partitions 0.. of topic t with ``codes``, as the edge caches it."""
    response = OffsetCommitResponse(
        [OffsetCommitTopicResult("t", [OffsetCommitPartitionResult(i, code) for i, code in enumerate(codes)])]
    )
    first = next((code for code in codes if code != ErrorCode.none), ErrorCode.none)
    return cache.encoded(8, codes, response, first)


def _commits(metrics: KcoordMetrics) -> float:
    return metrics.registry.get_sample_value("kcoord_offset_commits_total") or 0.0


def test_a_cached_commit_answer_counts_its_committed_partitions_every_time() -> None:
    """The same encoded answer observed five times counts its two good partitions five times."""
    metrics, cache = KcoordMetrics(), ResponseCache(ApiKey.OFFSET_COMMIT)
    ok_ok_failed = (ErrorCode.none, ErrorCode.none, ErrorCode.offset_metadata_too_large)
    for _ in range(5):
        metrics.observe_exchange(ApiKey.OFFSET_COMMIT, None, _answer(cache, ok_ok_failed))
    assert _commits(metrics) == 10
    metrics.observe_exchange(ApiKey.OFFSET_COMMIT, None, _answer(cache, (ErrorCode.illegal_generation,)))
    metrics.observe_exchange(ApiKey.OFFSET_COMMIT, None, _answer(cache, (ErrorCode.none,)))
    assert _commits(metrics) == 11


def test_apis_not_counted_and_unreadable_shapes_change_nothing() -> None:
    """A Heartbeat exchange is ignored; a commit body of the wrong shape is logged, not raised."""
    metrics = KcoordMetrics()
    metrics.observe_exchange(ApiKey.HEARTBEAT, None, {"error_code": 0})
    metrics.observe_exchange(ApiKey.OFFSET_COMMIT, None, {"topics": [{"partitions": [{"error_code": "x"}]}]})
    metrics.observe_exchange(ApiKey.OFFSET_COMMIT, None, None)
    assert _commits(metrics) == 0
    assert (metrics.registry.get_sample_value("kcoord_produce_bytes_total") or 0.0) == 0
