"""The ``file://`` engine's partition log: group commit, never blocking the loop.

Appends assign offsets and positions on the event loop (in call order) and queue the bytes.
The store's :class:`~kcoord.storage.group_commit.GroupCommitter` takes everything queued by all
its logs as one round to an executor thread, which writes each log's part with ``writev`` (one
call per segment) and, under flush policy "always", makes every file the round wrote durable at once;
then, back on the loop, the batches become visible in order and their appends return.
Reads ``pread`` the page cache directly on the loop. Compaction's file work is in
:mod:`kcoord.storage.file_compaction`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import ParamSpec, TypeVar

import structlog

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.api import LogConfig
from kcoord.storage.compaction import SegmentReader, Swap
from kcoord.storage.durable_sync import sync_files
from kcoord.storage.file_compaction import (
    FileSwap,
    discard_cleaned_files,
    install_cleaned_files,
    read_segment_file,
    stage_cleaned_files,
)
from kcoord.storage.file_segment import FileSegmentData, fsync_directory
from kcoord.storage.group_commit import CommitJob, GroupCommitter, JobOutcome
from kcoord.storage.log import SegmentedLog
from kcoord.storage.log_start_file import write_log_start
from kcoord.storage.queued_ops import QueuedRoll as _Roll
from kcoord.storage.queued_ops import QueuedWrite as _Write
from kcoord.storage.queued_ops import QueuedWriter
from kcoord.storage.segment import Placement, Segment, SegmentData, scan_segment
from kcoord.timer.api import Clock

__all__ = ["FileLog"]

logger = structlog.get_logger(__name__)

_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass(slots=True)
class _Flush:
    segment: Segment
    waiters: list[asyncio.Future[None]] = field(default_factory=list)


_Op = _Write | _Roll | _Flush


@dataclass(slots=True)
class _Job:
    """A log's queued operations as one part of a group-commit round."""

    ops: list[_Op]
    fsync: bool

    def write(self) -> list[int]:
        to_sync = _write_ops(self.ops)
        return [data.fd for data in to_sync.values() if data.fd >= 0] if self.fsync else []


class FileLog(QueuedWriter[_Op], SegmentedLog):
    """A partition log stored in ``directory`` (see :mod:`kcoord.storage.file_segment`)."""

    _times_own_appends = True

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        segments: list[Segment],
        executor: Executor,
        committer: GroupCommitter | None = None,
        log_start_offset: int | None = None,
    ) -> None:
        super().__init__(topic, partition, config, clock, segments, log_start_offset)
        self.directory = directory
        self._executor = executor
        self._committer = committer or GroupCommitter(executor, sync=sync_files)
        self._queue: list[_Op] = []
        self._jobs_in_flight: int = 0
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._dirty = False
        self.synced_at_close = False
        """True once :meth:`close` made everything written durable; the clean-shutdown marker needs it."""
        self._flusher: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the background flush (on the running loop) when the flush policy is "interval"."""
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_periodically())

    # Writer.

    def _new_segment(self, base_offset: int, now_ms: int) -> Segment:
        return Segment(
            base_offset,
            FileSegmentData(self.directory, base_offset),
            self._config.index_interval_bytes,
            now_ms,
        )

    def _record_roll(self, old: Segment, new: Segment, seal_entry: tuple[int, int] | None) -> None:
        self._enqueue(_Roll(old, new, seal_entry))

    async def _write(self, segment: Segment, data: bytes, placement: Placement) -> None:
        await asyncio.shield(self._write_soon(segment, data, placement))

    def _write_soon(
        self,
        segment: Segment,
        data: bytes,
        placement: Placement,
        on_written: Callable[[asyncio.Future[None]], None] | None = None,
    ) -> asyncio.Future[None]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        started = time.perf_counter() if self.timings is not None else 0.0
        self._enqueue(_Write(segment, data, placement, done, started, on_written))
        return done

    async def flush(self) -> None:
        if self._closed or self._failure is not None:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._enqueue(_Flush(self._segments[-1], [done]))
        await asyncio.shield(done)

    def take_job(self) -> _Job | None:
        ops = self._take_queued()
        if ops is None:
            return None
        self._jobs_in_flight += 1
        return _Job(ops, self._config.flush_policy == "always")

    def finish_job(self, job: CommitJob, outcome: JobOutcome) -> None:
        if not isinstance(job, _Job):
            raise TypeError("a file log finishes its own jobs")
        self._jobs_in_flight -= 1
        if isinstance(outcome, BaseException):
            self._fail(job.ops + self._queue, outcome)
            self._queue = []
        else:
            if outcome is not None and self.timings is not None:
                self.timings.on_flush(self._topic, self._partition, outcome)
            self._complete(job.ops, job.fsync)
        if self._idle_waiters:  # _wake_if_idle's business only when someone waits for idle
            self._wake_if_idle()

    def _complete(self, ops: list[_Op], fsynced: bool) -> None:
        timings = self.timings
        finished = time.perf_counter()
        written: list[_Write] = []
        for op in ops:
            if isinstance(op, _Write):
                placement = op.placement  # _made_visible, inline: once per batch of every round
                op.segment.apply(placement)
                self._end_offset = placement.next_offset
                done = op.done
                if not done.done():
                    done.set_result(None)
                if op.on_written is not None:
                    written.append(op)
                if timings is not None and op.started:
                    timings.on_append(self._topic, self._partition, len(op.data), finished - op.started)
                if not fsynced:
                    self._dirty = True
            elif isinstance(op, _Roll):
                if op.seal_entry is not None:
                    op.old.add_time_entry(op.seal_entry)
            else:
                self._dirty = False
                for waiter in op.waiters:
                    if not waiter.done():
                        waiter.set_result(None)
        if self._listeners:
            self._notify()
        if written:
            self._call_on_written(written)

    def _fail(self, ops: list[_Op], exc: BaseException) -> None:
        self._failure = exc
        logger.error("log.write_failed", topic=self._topic, partition=self._partition, error=repr(exc))
        for op in ops:
            waiters = [op.done] if isinstance(op, _Write) else op.waiters if isinstance(op, _Flush) else []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(
                        KafkaError(ErrorCode.kafka_storage_error, f"log write failed: {exc!r}")
                    )
        self._call_on_written([op for op in ops if isinstance(op, _Write)])

    def _call_on_written(self, written: list[_Write]) -> None:
        """The writes' ``on_written`` callbacks, each after its ``done`` (one failing stops no other)."""
        for op in written:
            if op.on_written is None:
                continue
            try:
                op.on_written(op.done)
            except Exception:
                logger.exception("log.on_written_failed", topic=self._topic, partition=self._partition)

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._config.flush_interval_ms / 1000)
            if self._config.flush_policy == "interval" and self._dirty and self._gate is None:
                try:
                    await self.flush()
                except KafkaError:
                    return

    # Structural changes (appends are held back and the writer is idle).

    async def _run(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        if kwargs:
            raise TypeError("executor jobs take positional arguments")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _create_segment(self, base_offset: int, now_ms: int) -> Segment:
        segment = self._new_segment(base_offset, now_ms)
        await self._run(_create_files, segment)
        return segment

    async def _truncate_segment(self, segment: Segment, position: int) -> Segment:
        return await self._run(_truncate_files, segment, position, self._config.index_interval_bytes)

    async def _persist_log_start(self, offset: int) -> None:
        await self._run(write_log_start, self.directory, offset)

    async def _delete_segments(self, segments: list[Segment]) -> None:
        await self._run(_delete_files, segments)

    async def _close_files(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        if self._failure is not None:
            logger.error("log.final_sync_skipped", topic=self._topic, partition=self._partition)
        else:
            try:
                await self._run(_sync_all, self._segments)
                self.synced_at_close = True
            except OSError as exc:
                logger.error(
                    "log.final_sync_failed", topic=self._topic, partition=self._partition, error=repr(exc)
                )
        await self._run(_close_all, self._segments)

    # Compaction: staging and discarding run in the cleaner's thread, the rest on the writer pool.

    async def _segment_reader(self, segment: Segment) -> SegmentReader:
        path, size = _file_data(segment).log_path, segment.size
        return lambda: read_segment_file(path, size)

    def _stage_cleaned(self, old: Segment, data: bytes, rebuilt: Segment) -> SegmentData:
        return stage_cleaned_files(_file_data(old), data, rebuilt)

    def _discard_cleaned(self, swaps: list[Swap]) -> None:
        discard_cleaned_files(_file_swaps(swaps))

    async def _install_cleaned(self, swaps: list[Swap]) -> None:
        await self._run(install_cleaned_files, _file_swaps(swaps))

    async def _close_replaced(self, segments: list[Segment]) -> None:
        await self._run(_close_all, segments)

    async def delete_files(self) -> None:
        """Close the log and remove its directory."""
        await self.close()
        await self._run(_remove_directory, self.directory)


def _file_data(segment: Segment) -> FileSegmentData:
    data = segment.data
    if not isinstance(data, FileSegmentData):
        raise TypeError("file log holds a foreign segment")
    return data


def _file_swaps(swaps: list[Swap]) -> list[FileSwap]:
    return [(_file_data(old), None if new is None else _file_data(new)) for old, new in swaps]


def _write_ops(ops: list[_Op]) -> dict[int, FileSegmentData]:
    """Run queued writes in order (in a thread): one writev per segment run.

    Returns the segment files written since their last sync (the round fsyncs them).
    """
    run: list[_Write] = []
    to_sync: dict[int, FileSegmentData] = {}

    def flush_run() -> None:
        if run:
            data = _file_data(run[0].segment)
            data.write_log([w.data for w in run])
            data.write_index_entries(data.base_offset, [w.placement for w in run])
            to_sync[id(data)] = data
            run.clear()

    for op in ops:
        if isinstance(op, _Write):
            if run and run[0].segment is not op.segment:
                flush_run()
            run.append(op)
            continue
        flush_run()
        if isinstance(op, _Roll):
            old = _file_data(op.old)
            if op.seal_entry is not None:
                old.write_time_entry(op.seal_entry)
            old.sync_log()
            old.sync_indexes()
            old.close_indexes()
            to_sync.pop(id(old), None)
            _create_files(op.new)
        else:
            to_sync[id(_file_data(op.segment))] = _file_data(op.segment)
            for data in to_sync.values():
                if data.fd >= 0:
                    data.sync_log()
            to_sync.clear()
    flush_run()
    return to_sync


def _create_files(segment: Segment) -> None:
    data = _file_data(segment)
    data.open_log(create=True)
    data.open_indexes()
    fsync_directory(data.log_path.parent)


def _truncate_files(segment: Segment, position: int, index_interval_bytes: int) -> Segment:
    data = _file_data(segment)
    os.ftruncate(data.fd, position)
    os.fsync(data.fd)
    rebuilt = scan_segment(
        segment.base_offset,
        data,
        position,
        index_interval_bytes=index_interval_bytes,
        created_ms=segment.created_ms,
        verify_crc=False,
    )
    data.open_indexes()
    data.rewrite_indexes(rebuilt)
    return rebuilt


def _delete_files(segments: list[Segment]) -> None:
    for segment in segments:
        _file_data(segment).delete()


def _sync_all(segments: list[Segment]) -> None:
    active = _file_data(segments[-1])
    active.sync_log()
    active.sync_indexes()


def _close_all(segments: list[Segment]) -> None:
    for segment in segments:
        _file_data(segment).close()


def _remove_directory(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
