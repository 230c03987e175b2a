"""The file engine on disk: layout, reopening, crash recovery and index repair."""

from __future__ import annotations

import errno
import shutil
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import TypeVar

import pytest
from structlog.testing import capture_logs

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import iter_batches
from kcoord.storage import LogConfig, LogStore, PartitionLog, open_store
from kcoord.storage.file_log import FileLog
from kcoord.storage.file_segment import load_segments

from .helpers import T0_MS, BatchBuilder, ManualClock

_T = TypeVar("_T")

SMALL_SEGMENTS = LogConfig(segment_bytes=1000, index_interval_bytes=100)


async def opened(root: Path, config: LogConfig = SMALL_SEGMENTS) -> LogStore:
    store = open_store(root.as_uri(), config, retention_check_interval_ms=0)
    await store.open()
    return store


def bases_of(log: PartitionLog) -> list[int]:
    """Base offsets of every batch, reading the log from its start."""
    bases: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for _, header in iter_batches(data, verify_crc=True):
            bases.append(header.base_offset)
            offset = header.next_offset
    return bases


async def fill(log: PartitionLog, make_batch: BatchBuilder, count: int) -> None:
    for i in range(count):
        await log.append(make_batch([b"v" * 40], timestamps=[T0_MS + i]))


def log_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.log"))


async def test_layout_uses_padded_segment_names(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """A partition lives in <topic>-<partition>/ with 20-digit .log/.index/.timeindex files per segment."""
    store = await opened(tmp_path)
    log = await store.create("orders", 3)
    await fill(log, make_batch, 30)
    await store.close()
    directory = tmp_path / "orders-3"
    names = log_files(directory)
    assert names[0] == "00000000000000000000.log" and len(names) > 1
    for name in names:
        stem = name.removesuffix(".log")
        assert (directory / f"{stem}.index").exists() and (directory / f"{stem}.timeindex").exists()
    assert (tmp_path / "orders-3" / "00000000000000000000.index").stat().st_size % 8 == 0


async def test_deleted_records_stay_deleted_after_reopen(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """A log start moved by DeleteRecords survives a clean close and a crash (no close) alike."""
    store = await opened(tmp_path)
    log = await store.create("t", 0)
    await fill(log, make_batch, 50)
    await log.delete_records_before(33)
    await store.close()
    again = await opened(tmp_path)
    reopened = again.get("t", 0)
    assert reopened is not None and reopened.log_start_offset == 33
    assert bases_of(reopened) == list(range(33, 50))
    await reopened.delete_records_before(40)
    crashed = await opened(tmp_path)
    assert (log_after := crashed.get("t", 0)) is not None and log_after.log_start_offset == 40
    await crashed.close()
    await again.close()


async def test_clean_reopen_keeps_everything(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """After close and reopen the same partitions, offsets, reads and timestamps are there."""
    store = await opened(tmp_path)
    log = await store.create("t", 0)
    await fill(log, make_batch, 50)
    await store.close()
    again = await opened(tmp_path)
    reopened = again.get("t", 0)
    assert reopened is not None and again.partitions() == [("t", 0)]
    assert reopened.log_end_offset == 50
    assert bases_of(reopened) == list(range(50))
    assert reopened.offset_for_timestamp(T0_MS + 7) == (7, T0_MS + 7)
    assert reopened.max_timestamp() == (49, T0_MS + 49)
    assert (await reopened.append(make_batch([b"next"]))).base_offset == 50
    await again.close()


async def test_crash_keeps_every_acknowledged_append(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """A store reopened from the files of one that never closed sees every acknowledged batch."""
    store = await opened(tmp_path / "live")
    log = await store.create("t", 0)
    await fill(log, make_batch, 40)
    shutil.copytree(tmp_path / "live", tmp_path / "crashed")
    recovered = await opened(tmp_path / "crashed")
    again = recovered.get("t", 0)
    assert again is not None
    assert again.log_end_offset == 40
    assert bases_of(again) == list(range(40))
    await recovered.close()
    await store.close()


async def test_torn_tail_is_cut_and_logged(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """A last segment cut mid-batch loses only that batch, and the cut is logged."""
    store = await opened(tmp_path / "live", LogConfig())
    await fill(await store.create("t", 0), make_batch, 10)
    shutil.copytree(tmp_path / "live", tmp_path / "crashed")
    await store.close()
    segment = tmp_path / "crashed" / "t-0" / "00000000000000000000.log"
    size = segment.stat().st_size
    with segment.open("r+b") as f:
        f.truncate(size - 5)
    with capture_logs() as logs:
        recovered = await opened(tmp_path / "crashed")
    log = recovered.get("t", 0)
    assert log is not None
    assert log.log_end_offset == 9 and bases_of(log) == list(range(9))
    torn = [entry for entry in logs if entry["event"] == "log.truncated_torn_tail"]
    assert len(torn) == 1
    assert torn[0]["valid_end_offset"] == 9 and torn[0]["topic"] == "t" and torn[0]["partition"] == 0
    assert torn[0]["bytes_dropped"] == size // 10 - 5
    assert (await log.append(make_batch([b"after"]))).base_offset == 9
    await recovered.close()


async def test_corrupt_last_batch_is_dropped_after_a_crash(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """Without a clean-shutdown marker a CRC mismatch in the active segment ends the valid data."""
    store = await opened(tmp_path / "live", LogConfig())
    await fill(await store.create("t", 0), make_batch, 5)
    shutil.copytree(tmp_path / "live", tmp_path / "crashed")
    await store.close()
    segment = tmp_path / "crashed" / "t-0" / "00000000000000000000.log"
    raw = bytearray(segment.read_bytes())
    raw[-3] ^= 0xFF
    segment.write_bytes(bytes(raw))
    with capture_logs():
        recovered = await opened(tmp_path / "crashed")
    log = recovered.get("t", 0)
    assert log is not None and log.log_end_offset == 4
    await recovered.close()


async def test_damaged_index_of_a_sealed_segment_is_rebuilt(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """A sealed segment whose index file is garbage is rescanned; every offset still reads."""
    store = await opened(tmp_path)
    await fill(await store.create("t", 0), make_batch, 40)
    await store.close()
    index = tmp_path / "t-0" / "00000000000000000000.index"
    index.write_bytes(b"\x01\x02\x03")
    with capture_logs() as logs:
        again = await opened(tmp_path)
    assert any(entry["event"] == "log.rebuilding_index" for entry in logs)
    reopened = again.get("t", 0)
    assert reopened is not None and bases_of(reopened) == list(range(40))
    for offset in range(40):
        assert next(iter_batches(reopened.read(offset, 1)))[1].base_offset == offset
    await again.close()
    assert index.stat().st_size % 8 == 0 and index.stat().st_size > 3


async def test_interval_flush_policy_appends_and_flushes(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """Under the "interval" policy appends return unflushed, flush() syncs, and reopening sees the data."""
    store = await opened(tmp_path, LogConfig(flush_policy="interval", flush_interval_ms=10))
    log = await store.create("t", 0)
    await fill(log, make_batch, 20)
    await log.flush()
    await store.close()
    again = await opened(tmp_path)
    reopened = again.get("t", 0)
    assert reopened is not None and bases_of(reopened) == list(range(20))
    await again.close()


async def test_deleted_topic_leaves_no_directory(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """delete_topic removes the partition directories, so a reopen does not find them."""
    store = await opened(tmp_path)
    await fill(await store.create("gone", 0), make_batch, 3)
    await store.create("kept", 0)
    await store.delete_topic("gone")
    await store.close()
    assert not (tmp_path / "gone-0").exists()
    again = await opened(tmp_path)
    assert again.partitions() == [("kept", 0)]
    await again.close()


async def test_truncation_survives_a_reopen(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """Segments and bytes removed by truncate_to stay removed on disk."""
    store = await opened(tmp_path)
    log = await store.create("t", 0)
    await fill(log, make_batch, 40)
    await log.truncate_to(12)
    await store.close()
    again = await opened(tmp_path)
    reopened = again.get("t", 0)
    assert reopened is not None and reopened.log_end_offset == 12 and bases_of(reopened) == list(range(12))
    await again.close()


async def test_retention_removes_segment_files(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """Segments deleted by retention are gone from disk and stay gone after a reopen."""
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100, retention_bytes=1500, retention_ms=-1)
    store = await opened(tmp_path, config)
    log = await store.create("t", 0)
    await fill(log, make_batch, 60)
    before = log_files(tmp_path / "t-0")
    assert await store.enforce_retention() > 0
    after = log_files(tmp_path / "t-0")
    assert len(after) < len(before) and after[0] == f"{log.log_start_offset:020d}.log"
    start = log.log_start_offset
    await store.close()
    again = await opened(tmp_path, config)
    reopened = again.get("t", 0)
    assert reopened is not None and reopened.log_start_offset == start and reopened.log_end_offset == 60
    await again.close()


class FaultyExecutor(Executor):
    """Runs jobs inline, except that every job fails as a full disk would while ``broken`` is set."""

    def __init__(self) -> None:
        self.broken = True

    def submit(self, fn: Callable[..., _T], /, *args: object, **kwargs: object) -> Future[_T]:
        future: Future[_T] = Future()
        if self.broken:
            future.set_exception(OSError(errno.ENOSPC, "No space left on device"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


async def test_a_failed_write_fails_its_appends_and_the_log_recovers(
    tmp_path: Path, make_batch: BatchBuilder
) -> None:
    """A failed write answers KAFKA_STORAGE_ERROR; once the disk works again the next append succeeds."""
    directory = tmp_path / "t-0"
    directory.mkdir()
    segments = load_segments(directory, "t", 0, index_interval_bytes=100, now_ms=T0_MS, clean_shutdown=False)
    executor = FaultyExecutor()
    executor.broken = False
    log = FileLog(directory, "t", 0, LogConfig(), ManualClock(), segments, executor)
    await log.append(make_batch([b"kept"]))
    executor.broken = True
    with capture_logs() as logs, pytest.raises(KafkaError) as caught:
        await log.append(make_batch([b"a"]))
    assert caught.value.code == ErrorCode.kafka_storage_error
    assert any(entry["event"] == "log.write_failed" for entry in logs)
    with pytest.raises(KafkaError):
        await log.append(make_batch([b"b"]))  # the repair itself still fails
    assert log.log_end_offset == 1
    executor.broken = False
    with capture_logs() as logs:
        result = await log.append(make_batch([b"c"]))
    assert any(entry["event"] == "log.recovered" for entry in logs)
    assert result.base_offset == 1 and log.log_end_offset == 2
    await log.close()
    reopened = load_segments(directory, "t", 0, index_interval_bytes=100, now_ms=T0_MS, clean_shutdown=False)
    assert reopened[-1].next_offset == 2
