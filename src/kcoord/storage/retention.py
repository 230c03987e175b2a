"""The background task that applies retention every ``log.retention.check.interval.ms``.

The log cleaner runs on the same loop, named "cleaner", every ``log.cleaner.backoff.ms``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from kcoord.timer.periodic import PeriodicTask

__all__ = ["RetentionLoop"]


class RetentionLoop(PeriodicTask):
    """Calls ``enforce`` every ``interval_ms`` until stopped; a failing pass is logged, not fatal."""

    def __init__(
        self, enforce: Callable[[], Awaitable[int]], interval_ms: int, *, name: str = "retention"
    ) -> None:
        super().__init__(
            enforce, interval_ms / 1000, failure_event=f"log.{name}_failed", task_name=f"kcoord-log-{name}"
        )
