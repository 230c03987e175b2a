"""RegexMatching: a shard's regex jobs run on the pattern worker and come back to that shard only."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, cast

from kcoord.coordinator.client_regex import compile_client_regex
from kcoord.coordinator.consumer.change import ConsumerGroupChange
from kcoord.coordinator.consumer.regex_subscriptions import RegexJob
from kcoord.coordinator.result import CoordinatorResult
from kcoord.runtime.group_coordinator import GroupCoordinator
from kcoord.runtime.pattern_worker import THREAD_NAME, PatternWorker
from kcoord.runtime.regex_matching import RegexMatching

NAMES = ("orders-1", "orders-2", "audit")


class Shard:
    """The shard operations RegexMatching calls, recording what came back and on which thread it ran."""

    def __init__(self, job: RegexJob) -> None:
        self.jobs = [job]
        self.fed: list[tuple[str, frozenset[str] | None]] = []

    def regex_jobs(self) -> list[RegexJob]:
        jobs, self.jobs = self.jobs, []
        return jobs

    def on_regex_matched(self, job: RegexJob, names: frozenset[str], now_ms: int) -> CoordinatorResult:
        self.fed.append(("matched", names))
        return ConsumerGroupChange()

    def on_regex_abandoned(self, job: RegexJob, now_ms: int) -> CoordinatorResult:
        self.fed.append(("abandoned", None))
        return ConsumerGroupChange()


class Runner:
    def __init__(self, shard: Shard) -> None:
        self.shard = shard

    def run(self, operation: Callable[[int], CoordinatorResult]) -> None:
        operation(0)


class Coordinator:
    def __init__(self, shard: Shard) -> None:
        self.runner: Runner | None = Runner(shard)

    def loaded_runner(self, group_id: str) -> Runner | None:
        return self.runner


def _job(regex: str, pattern: Any = None) -> RegexJob:
    compiled = pattern or compile_client_regex(regex, "SubscribedTopicRegex")
    return RegexJob(regex, compiled, frozenset(NAMES), NAMES)


async def _settle(matching: RegexMatching) -> None:
    await asyncio.gather(*matching._tasks)


async def test_a_job_runs_on_the_worker_and_its_result_goes_back_to_its_shard() -> None:
    """The job's names are matched on the worker thread and fed to the shard that left the job."""
    threads: list[str] = []

    class Recording:
        def matches(self, text: str) -> bool:
            threads.append(threading.current_thread().name)
            return text.startswith("orders-")

    shard = Shard(_job("orders-.*", Recording()))
    worker = PatternWorker()
    matching = RegexMatching(cast(GroupCoordinator, Coordinator(shard)), worker)
    try:
        matching.start_jobs("g")
        await _settle(matching)
    finally:
        await matching.stop()
        await worker.close()
    assert shard.fed == [("matched", frozenset({"orders-1", "orders-2"}))]
    assert threads and all(name.startswith(THREAD_NAME) for name in threads)


async def test_a_result_for_a_shard_unloaded_meanwhile_is_dropped() -> None:
    """When the group's partition was reloaded (another shard) or unloaded, nothing is fed back."""
    for replaced in (True, False):
        shard = Shard(_job("orders-.*"))
        coordinator = Coordinator(shard)
        worker = PatternWorker()
        matching = RegexMatching(cast(GroupCoordinator, coordinator), worker)
        try:
            matching.start_jobs("g")
            coordinator.runner = Runner(Shard(_job("other"))) if replaced else None
            await _settle(matching)
        finally:
            await matching.stop()
            await worker.close()
        assert shard.fed == []


async def test_stop_cancels_a_running_job_and_gives_it_back() -> None:
    """stop() cancels a job still matching; the shard is told it was abandoned, to match it again."""
    release = threading.Event()

    class Slow:
        def matches(self, text: str) -> bool:
            release.wait(5)
            return False

    shard = Shard(_job("slow", Slow()))
    worker = PatternWorker()
    matching = RegexMatching(cast(GroupCoordinator, Coordinator(shard)), worker)
    try:
        matching.start_jobs("g")
        await asyncio.sleep(0.05)
        await matching.stop()
    finally:
        release.set()
        await worker.close()
    assert shard.fed == [("abandoned", None)]
