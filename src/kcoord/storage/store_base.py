"""What every log store does the same way, whatever keeps its bytes: the catalogue of open logs,
the retention and cleaner loops, and the passes they run."""

from __future__ import annotations

from typing import Generic, NotRequired, TypedDict, TypeVar

from kcoord.storage.api import FirstUnstableOffset, LogConfig, PartitionLog, StorageTimings
from kcoord.storage.log import SegmentedLog
from kcoord.storage.retention import RetentionLoop
from kcoord.timer.api import Clock
from kcoord.timer.clock import SystemClock

L = TypeVar("L", bound=SegmentedLog)

DEFAULT_RETENTION_CHECK_INTERVAL_MS = 300000
DEFAULT_LOG_CLEANER_BACKOFF_MS = 15000


class BackgroundPasses(TypedDict):
    """How often every store runs its background passes (each engine's constructor passes them on)."""

    retention_check_interval_ms: NotRequired[int]
    """``log.retention.check.interval.ms``."""
    log_cleaner_backoff_ms: NotRequired[int]
    """``log.cleaner.backoff.ms``."""


class StoreBase(Generic[L]):
    def __init__(
        self,
        default_config: LogConfig | None = None,
        clock: Clock | None = None,
        *,
        retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
        log_cleaner_backoff_ms: int = DEFAULT_LOG_CLEANER_BACKOFF_MS,
    ) -> None:
        self._default_config = default_config or LogConfig()
        self.timings: StorageTimings | None = None
        """Given to every log this store opens or creates."""
        self.first_unstable: FirstUnstableOffset | None = None
        """Given to every log this store opens or creates: where its cleaner must stop."""
        self._clock: Clock = clock or SystemClock()
        self._logs: dict[tuple[str, int], L] = {}
        self._retention = RetentionLoop(self.enforce_retention, retention_check_interval_ms)
        self._cleaner = RetentionLoop(self.compact_logs, log_cleaner_backoff_ms, name="cleaner")

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._logs)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def configure(self, topic: str, partition: int, config: LogConfig) -> None:
        """Give the partition's log ``config`` now, if it is open."""
        self._open_log(topic, partition, config)

    def _open_log(self, topic: str, partition: int, config: LogConfig | None) -> L | None:
        """The partition's log if it is open, given ``config`` when one is passed (what ``create``
        answers for a log that exists)."""
        log = self._logs.get((topic, partition))
        if log is not None and config is not None:
            log.update_config(config)
        return log

    def _adopt(self, log: L) -> L:
        """Register a log this store opened or created."""
        log.timings = self.timings
        log.first_unstable = self.first_unstable
        self._logs[(log.topic, log.partition)] = log
        return log

    def _start_background(self) -> None:
        self._retention.start()
        self._cleaner.start()

    async def enforce_retention(self) -> int:
        """One retention pass over every log now; how many segments were deleted."""
        now = self._clock.now_ms()
        deleted = 0
        for log in list(self._logs.values()):
            deleted += await log.enforce_retention(now)
        return deleted

    async def compact_logs(self) -> int:
        """One cleaner pass: compact every log that is due; how many were compacted."""
        compacted = 0
        for log in list(self._logs.values()):
            now = self._clock.now_ms()
            if log.compaction_due(now) and await log.compact(now) is not None:
                compacted += 1
        return compacted

    async def _stop_and_close_logs(self) -> None:
        await self._retention.stop()
        await self._cleaner.stop()
        for log in self._logs.values():
            await log.close()
