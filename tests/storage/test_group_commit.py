"""Group commit: concurrent appends to many logs of a file store share write rounds and one sync call,
a sync covers several files with one syncfs per filesystem, and a failing sync fails only what it covered."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage import LogConfig
from kcoord.storage.durable_sync import sync_files
from kcoord.storage.file_store import FileLogStore

from .helpers import BatchBuilder


class RecordingSync:
    """Stands in for the round's sync: records which descriptors each call covered; can fail."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.fail = False

    def __call__(self, fds: Sequence[int]) -> None:
        self.calls.append(list(fds))
        if self.fail:
            raise OSError(5, "Input/output error")


async def store_with(tmp_path: Path, sync: RecordingSync) -> FileLogStore:
    store = FileLogStore(tmp_path / "data", LogConfig(), sync=sync)
    await store.open()
    return store


async def test_appends_to_many_logs_share_rounds_and_one_sync_per_round(
    tmp_path: Path, make_batch: BatchBuilder
) -> None:
    """Twenty concurrent appends over ten logs are durable in fewer rounds than appends, one sync each."""
    sync = RecordingSync()
    store = await store_with(tmp_path, sync)
    logs = [await store.create("t", p) for p in range(10)]
    results = await asyncio.gather(*(log.append(make_batch([b"x"])) for log in logs * 2))
    assert [r.base_offset for r in results] == [0] * 10 + [1] * 10
    assert 1 <= len(sync.calls) < 20
    assert len(sync.calls[0]) == 10, "the first round covered every log"
    await store.close()


async def test_a_failed_sync_fails_every_append_it_covered_and_the_logs_recover(
    tmp_path: Path, make_batch: BatchBuilder
) -> None:
    """When the round's sync fails, all its appends get KAFKA_STORAGE_ERROR; later appends succeed."""
    sync = RecordingSync()
    store = await store_with(tmp_path, sync)
    logs = [await store.create("t", p) for p in range(3)]
    sync.fail = True
    outcomes = await asyncio.gather(*(log.append(make_batch([b"x"])) for log in logs), return_exceptions=True)
    assert all(isinstance(o, KafkaError) and o.code == ErrorCode.kafka_storage_error for o in outcomes)
    assert [log.log_end_offset for log in logs] == [0, 0, 0]
    sync.fail = False
    again = await asyncio.gather(*(log.append(make_batch([b"y"])) for log in logs))
    assert [r.base_offset for r in again] == [0, 0, 0]
    assert [await log.read_async(0, 1 << 20) != b"" for log in logs] == [True] * 3
    await store.close()


def test_several_files_are_synced_with_one_syncfs_per_filesystem(tmp_path: Path) -> None:
    """Two files on one filesystem: one syncfs call; a lone file is fdatasync-ed without syncfs."""
    calls: list[int] = []
    fds = [os.open(tmp_path / name, os.O_CREAT | os.O_WRONLY) for name in ("a", "b")]
    try:
        sync_files(fds, calls.append)
        assert calls == [fds[0]]
        sync_files(fds[:1], calls.append)
        assert calls == [fds[0]]
        sync_files(fds, None)  # no syncfs: each file on its own
    finally:
        for fd in fds:
            os.close(fd)


def test_a_closed_descriptor_fails_the_sync(tmp_path: Path) -> None:
    """Sync errors surface as OSError (and so as the round's failure)."""
    fd = os.open(tmp_path / "a", os.O_CREAT | os.O_WRONLY)
    os.close(fd)
    with pytest.raises(OSError):
        sync_files([fd])


async def test_rounds_of_many_logs_with_the_default_sync_are_read_back_after_a_reopen(
    tmp_path: Path, make_batch: BatchBuilder
) -> None:
    """With the store's own round sync (AIO fdatasync where there is one), concurrent appends over
    twelve logs all succeed in shared rounds, and a reopened store reads every batch back."""
    store = FileLogStore(tmp_path / "data", LogConfig())
    await store.open()
    logs = [await store.create("t", p) for p in range(12)]
    results = await asyncio.gather(*(log.append(make_batch([b"x"])) for log in logs * 3))
    assert sorted(r.base_offset for r in results) == [0] * 12 + [1] * 12 + [2] * 12
    await store.close()
    reopened = FileLogStore(tmp_path / "data", LogConfig())
    await reopened.open()
    for partition in range(12):
        log = reopened.get("t", partition)
        assert log is not None and log.log_end_offset == 3
        assert await log.read_async(0, 1 << 20) != b""
    await reopened.close()
