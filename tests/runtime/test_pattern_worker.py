"""The pattern worker: jobs run one after another on its own thread, and the app stops it."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.pattern_worker import THREAD_NAME, PatternWorker
from tests.protocol.in_process import connected, running_app


def _worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


def _timed(spans: list[tuple[str, float, float]], name: str, seconds: float) -> str:
    started = time.monotonic()
    time.sleep(seconds)
    spans.append((threading.current_thread().name, started, time.monotonic()))
    return name


async def test_jobs_run_one_after_another_on_the_worker_thread() -> None:
    """Jobs submitted together run in order, never overlapping, on the worker's own thread."""
    worker = PatternWorker()
    spans: list[tuple[str, float, float]] = []
    try:
        results = await asyncio.gather(*(worker.run(_timed, spans, f"job-{n}", 0.05) for n in range(3)))
    finally:
        await worker.close()
    assert results == ["job-0", "job-1", "job-2"]
    assert all(name.startswith(THREAD_NAME) for name, _, _ in spans), spans
    assert all(spans[n][2] <= spans[n + 1][1] for n in range(2)), spans


async def test_close_waits_for_the_running_job_and_cancels_the_queued_ones() -> None:
    """close() lets the running job finish, cancels the queued one, stops the thread and refuses more."""
    worker = PatternWorker()
    spans: list[tuple[str, float, float]] = []
    running = asyncio.ensure_future(worker.run(_timed, spans, "running", 0.3))
    await asyncio.sleep(0.1)
    queued = asyncio.ensure_future(worker.run(_timed, spans, "queued", 0.0))
    await asyncio.sleep(0)  # the queued job is submitted before close() begins
    await worker.close()
    assert await running == "running"
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert len(spans) == 1, spans
    assert not _worker_threads()
    with pytest.raises(RuntimeError):
        await worker.run(_timed, spans, "late", 0.0)


async def test_the_app_stops_the_worker_that_matched_a_list_transactions_pattern(tmp_path: Path) -> None:
    """A ListTransactions v2 pattern is matched on the app's worker thread, which the app's stop ends."""
    assert not _worker_threads()
    async with running_app(tmp_path / "data") as (_, port), connected(port) as client:
        body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
        answer = await client.call(
            ApiKey.LIST_TRANSACTIONS, 2, {**body, "transactional_id_pattern": "txn-.*"}
        )
        assert answer.error_code == ErrorCode.none
        assert len(_worker_threads()) == 1
    assert not _worker_threads()
