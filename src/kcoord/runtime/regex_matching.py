"""Runs the consumer groups' long regex matches off the event loop and feeds the results back.

A shard leaves a :class:`~kcoord.coordinator.consumer.regex_subscriptions.RegexJob` pending when a
regex must be matched against more topic names than its turn allows (a new regex over a large
catalogue). After each consumer-group heartbeat the runtime takes the jobs of that group's shard,
runs each on the app's :class:`~kcoord.runtime.pattern_worker.PatternWorker`, and hands the names it
matched back to the same shard on its runner (``on_regex_matched``, whose records are appended like
any write's). A result for a shard that was unloaded meanwhile is dropped; a job that fails or is
cancelled is given back (``on_regex_abandoned``) so the regex is matched again at its next
resolution. Jobs a load leaves pending are taken at the group's next heartbeat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from kcoord.coordinator.consumer.regex_subscriptions import RegexJob
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import KafkaError
from kcoord.runtime.group_coordinator import GroupCoordinator
from kcoord.runtime.pattern_worker import PatternWorker

__all__ = ["RegexMatching"]

log = structlog.get_logger("kcoord.groups")


class RegexMatching:
    """The regex jobs in flight, each a task owned here until :meth:`stop` cancels it."""

    def __init__(self, coordinator: GroupCoordinator, worker: PatternWorker) -> None:
        self._coordinator = coordinator
        self._worker = worker
        self._tasks: set[asyncio.Task[None]] = set()

    def start_jobs(self, group_id: str) -> None:
        """Start the jobs the shard of ``group_id`` left pending (none when it is not loaded here)."""
        runner = self._coordinator.loaded_runner(group_id)
        if runner is None:
            return
        shard: Any = runner.shard
        for job in shard.regex_jobs():
            task = asyncio.get_running_loop().create_task(self._match(group_id, shard, job))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _match(self, group_id: str, shard: Any, job: RegexJob) -> None:
        try:
            names = await self._worker.run(job.run)
        except asyncio.CancelledError:
            self._feed(group_id, shard, lambda now_ms: shard.on_regex_abandoned(job, now_ms))
            raise
        except Exception as exc:  # the worker was closed, or the match itself failed
            log.warning("regex.match_failed", regex=job.regex, error=repr(exc))
            self._feed(group_id, shard, lambda now_ms: shard.on_regex_abandoned(job, now_ms))
            return
        log.debug("regex.matched", regex=job.regex, names=len(job.names), matched=len(names))
        self._feed(group_id, shard, lambda now_ms: shard.on_regex_matched(job, names, now_ms))

    def _feed(self, group_id: str, shard: Any, operation: Callable[[int], CoordinatorResult]) -> None:
        """Run ``operation`` on the shard's runner, if that shard is still the one loaded there."""
        runner = self._coordinator.loaded_runner(group_id)
        if runner is None or runner.shard is not shard:
            return
        try:
            runner.run(operation)
        except KafkaError as exc:  # the partition is moving away: its next owner matches again
            log.info("regex.result_dropped", group=group_id, error=exc.code.name)
        except Exception:
            log.exception("regex.result_failed", group=group_id)

    async def stop(self) -> None:
        """Cancel the jobs in flight and wait for them to end."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
