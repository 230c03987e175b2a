"""The ``file://`` store: one directory per partition under a data directory.

At open every ``<topic>-<partition>`` directory is loaded in a worker thread (the active
segment is rescanned, so a torn tail left by a crash is cut off). A ``.kcoord_clean_shutdown``
marker written by :meth:`FileLogStore.close` and removed at open tells the next start whether
the CRCs of the active segments must be checked.
"""

from __future__ import annotations

import asyncio
import functools
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import structlog

from kcoord.storage.api import LogConfig, PartitionLog, StorageTimings, SystemClock
from kcoord.storage.file_log import FileLog
from kcoord.storage.file_segment import fsync_directory, load_segments
from kcoord.storage.retention import RetentionLoop
from kcoord.timer.api import Clock

__all__ = ["FileLogStore"]

logger = structlog.get_logger(__name__)

CLEAN_SHUTDOWN_MARKER = ".kcoord_clean_shutdown"
_PARTITION_DIR = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)$")
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


class FileLogStore:
    """Logs under ``root``; blocking file work runs on a small thread pool owned by the store."""

    def __init__(
        self,
        root: Path,
        default_config: LogConfig | None = None,
        clock: Clock | None = None,
        *,
        retention_check_interval_ms: int = 300000,
        log_cleaner_backoff_ms: int = 15000,
        io_threads: int = 2,
    ) -> None:
        self.root = root
        self._default_config = default_config or LogConfig()
        self.timings: StorageTimings | None = None
        """Given to every log this store opens or creates."""
        self._clock: Clock = clock or SystemClock()
        self._executor = ThreadPoolExecutor(max_workers=io_threads, thread_name_prefix="kcoord-log")
        self._logs: dict[tuple[str, int], FileLog] = {}
        self._retention = RetentionLoop(self.enforce_retention, retention_check_interval_ms)
        self._cleaner = RetentionLoop(self.compact_logs, log_cleaner_backoff_ms, name="cleaner")

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        clean = await loop.run_in_executor(self._executor, self._prepare_root)
        for directory, topic, partition in await loop.run_in_executor(self._executor, self._partition_dirs):
            config = self._default_config
            load = functools.partial(
                load_segments,
                directory,
                topic,
                partition,
                index_interval_bytes=config.index_interval_bytes,
                now_ms=self._clock.now_ms(),
                clean_shutdown=clean,
            )
            segments = await loop.run_in_executor(self._executor, load)
            log = FileLog(directory, topic, partition, config, self._clock, segments, self._executor)
            log.timings = self.timings
            log.start()
            self._logs[(topic, partition)] = log
        logger.info("log_store.opened", root=str(self.root), partitions=len(self._logs), clean_shutdown=clean)
        self._retention.start()
        self._cleaner.start()

    def _prepare_root(self) -> bool:
        self.root.mkdir(parents=True, exist_ok=True)
        marker = self.root / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        if clean:
            marker.unlink()
            fsync_directory(self.root)
        return clean

    def _partition_dirs(self) -> list[tuple[Path, str, int]]:
        found = []
        for entry in sorted(self.root.iterdir()):
            match = _PARTITION_DIR.match(entry.name)
            if entry.is_dir() and match is not None:
                found.append((entry, match["topic"], int(match["partition"])))
        return found

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._logs)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    async def create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        existing = self._logs.get((topic, partition))
        if existing is not None:
            if config is not None:
                existing.update_config(config)
            return existing
        if not _TOPIC_NAME.match(topic) or topic in {".", ".."} or partition < 0:
            raise ValueError(f"not a storable topic-partition: {topic!r}-{partition}")
        config = config or self._default_config
        directory = self.root / f"{topic}-{partition}"
        now = self._clock.now_ms()

        def make() -> FileLog:
            directory.mkdir(parents=True, exist_ok=True)
            fsync_directory(self.root)
            segments = load_segments(
                directory,
                topic,
                partition,
                index_interval_bytes=config.index_interval_bytes,
                now_ms=now,
                clean_shutdown=False,
            )
            return FileLog(directory, topic, partition, config, self._clock, segments, self._executor)

        log = await asyncio.get_running_loop().run_in_executor(self._executor, make)
        log.timings = self.timings
        log.start()
        self._logs[(topic, partition)] = log
        return log

    async def delete_topic(self, topic: str) -> None:
        for key in [key for key in self._logs if key[0] == topic]:
            await self._logs.pop(key).delete_files()

    async def enforce_retention(self) -> int:
        now = self._clock.now_ms()
        deleted = 0
        for log in list(self._logs.values()):
            deleted += await log.enforce_retention(now)
        return deleted

    async def compact_logs(self) -> int:
        compacted = 0
        for log in list(self._logs.values()):
            now = self._clock.now_ms()
            if log.compaction_due(now) and await log.compact(now) is not None:
                compacted += 1
        return compacted

    async def close(self) -> None:
        await self._retention.stop()
        await self._cleaner.stop()
        for log in self._logs.values():
            await log.close()
        loop = asyncio.get_running_loop()
        if self.root.exists():
            await loop.run_in_executor(self._executor, self._write_marker)
        self._logs.clear()
        self._executor.shutdown(wait=True)

    def _write_marker(self) -> None:
        (self.root / CLEAN_SHUTDOWN_MARKER).touch()
        fsync_directory(self.root)
