"""The ``file://`` store: one directory per partition under a data directory.

At open every ``<topic>-<partition>`` directory is loaded in a worker thread (the active
segment is rescanned, so a torn tail left by a crash is cut off). A ``.kcoord_clean_shutdown``
marker written by :meth:`FileLogStore.close` and removed at open tells the next start whether
the CRCs of the active segments must be checked. It is written only when every log synced at
close: a log whose write failed, or whose final sync failed, leaves the next start to verify.

A new partition's directory entry is made durable by an fsync of the data directory, shared by
every creation under way (as a group commit: one fsync covers all directories made before it
started), so a round creating a thousand topics syncs the data directory a few times, not a
thousand.
"""

from __future__ import annotations

import asyncio
import functools
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Unpack

import structlog

from kcoord.storage.api import LogConfig, PartitionLog
from kcoord.storage.durable_sync import SyncFiles
from kcoord.storage.file_log import FileLog
from kcoord.storage.file_segment import fsync_directory, load_segments
from kcoord.storage.group_commit import GroupCommitter
from kcoord.storage.log_start_file import read_log_start
from kcoord.storage.store_base import BackgroundPasses, StoreBase
from kcoord.timer.api import Clock

__all__ = ["FileLogStore"]

logger = structlog.get_logger(__name__)

CLEAN_SHUTDOWN_MARKER = ".kcoord_clean_shutdown"
_PARTITION_DIR = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)$")
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


class FileLogStore(StoreBase[FileLog]):
    """Logs under ``root``; blocking file work runs on a small thread pool owned by the store."""

    def __init__(
        self,
        root: Path,
        default_config: LogConfig | None = None,
        clock: Clock | None = None,
        *,
        io_threads: int = 2,
        sync: SyncFiles | None = None,
        **passes: Unpack[BackgroundPasses],
    ) -> None:
        super().__init__(default_config, clock, **passes)
        self.root = root
        self._executor = ThreadPoolExecutor(max_workers=io_threads, thread_name_prefix="kcoord-log")
        self._committer = GroupCommitter(self._executor, sync=sync)
        self._root_lock = asyncio.Lock()
        self._root_waiter: asyncio.Future[None] | None = None
        """The next fsync of the data directory, joined by creations made before it starts."""

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        clean = await loop.run_in_executor(self._executor, self._prepare_root)
        for directory, topic, partition in await loop.run_in_executor(self._executor, self._partition_dirs):
            load = functools.partial(
                self._load_log,
                directory,
                topic,
                partition,
                self._default_config,
                now_ms=self._clock.now_ms(),
                clean_shutdown=clean,
            )
            log = await loop.run_in_executor(self._executor, load)
            self._adopt(log).start()
        logger.info("log_store.opened", root=str(self.root), partitions=len(self._logs), clean_shutdown=clean)
        self._start_background()

    def _load_log(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        now_ms: int,
        clean_shutdown: bool,
    ) -> FileLog:
        """A partition's log from its directory (blocking: runs on the storage executor)."""
        segments = load_segments(
            directory,
            topic,
            partition,
            index_interval_bytes=config.index_interval_bytes,
            now_ms=now_ms,
            clean_shutdown=clean_shutdown,
        )
        return FileLog(
            directory,
            topic,
            partition,
            config,
            self._clock,
            segments,
            self._executor,
            self._committer,
            read_log_start(directory),
        )

    def _prepare_root(self) -> bool:
        self.root.mkdir(parents=True, exist_ok=True)
        marker = self.root / CLEAN_SHUTDOWN_MARKER
        if marker.exists():
            marker.unlink()
            fsync_directory(self.root)
            return True
        # A directory that holds no partition yet has nothing a crash could have torn.
        return not self._partition_dirs()

    def _partition_dirs(self) -> list[tuple[Path, str, int]]:
        found = []
        for entry in sorted(self.root.iterdir()):
            match = _PARTITION_DIR.match(entry.name)
            if entry.is_dir() and match is not None:
                found.append((entry, match["topic"], int(match["partition"])))
        return found

    async def create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        existing = self._open_log(topic, partition, config)
        if existing is not None:
            return existing
        if not _TOPIC_NAME.match(topic) or topic in {".", ".."} or partition < 0:
            raise ValueError(f"not a storable topic-partition: {topic!r}-{partition}")
        config = config or self._default_config
        directory = self.root / f"{topic}-{partition}"
        now = self._clock.now_ms()

        def make() -> FileLog:
            directory.mkdir(parents=True, exist_ok=True)
            return self._load_log(directory, topic, partition, config, now_ms=now, clean_shutdown=False)

        log = await asyncio.get_running_loop().run_in_executor(self._executor, make)
        try:
            await self._sync_root()
        except BaseException:
            await log.close()
            raise
        self._adopt(log).start()
        return log

    async def _sync_root(self) -> None:
        """Returns once an fsync of the data directory that started after this call has finished."""
        waiter = self._root_waiter
        if waiter is not None:
            await asyncio.shield(waiter)
            return
        loop = asyncio.get_running_loop()
        waiter = self._root_waiter = loop.create_future()
        async with self._root_lock:
            self._root_waiter = None  # directories made from now on need the next fsync
            try:
                await loop.run_in_executor(self._executor, fsync_directory, self.root)
            except BaseException as exc:
                waiter.set_exception(exc)
                waiter.exception()  # retrieved: the joiners (if any) raise it, this caller too
                raise
            waiter.set_result(None)

    async def delete_topic(self, topic: str) -> None:
        for key in [key for key in self._logs if key[0] == topic]:
            await self._logs.pop(key).delete_files()

    async def close(self) -> None:
        await self._stop_and_close_logs()
        loop = asyncio.get_running_loop()
        unsynced = sorted(
            f"{log.topic}-{log.partition}" for log in self._logs.values() if not log.synced_at_close
        )
        if unsynced:
            logger.warning("log_store.unclean_close", unsynced=unsynced[:20], count=len(unsynced))
        elif self.root.exists():
            await loop.run_in_executor(self._executor, self._write_marker)
        self._logs.clear()
        self._executor.shutdown(wait=True)
        self._committer.close()

    def _write_marker(self) -> None:
        (self.root / CLEAN_SHUTDOWN_MARKER).touch()
        fsync_directory(self.root)
