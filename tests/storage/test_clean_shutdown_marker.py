"""The clean-shutdown marker is written only when every log synced at close, so CRC checks are skipped
only after a shutdown that left nothing unsynced."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from kcoord.protocol.errors import KafkaError
from kcoord.storage import LogConfig, LogStore, file_log, open_store
from kcoord.storage.file_segment import FileSegmentData
from kcoord.storage.file_store import CLEAN_SHUTDOWN_MARKER

from .helpers import BatchBuilder


async def opened(root: Path) -> LogStore:
    store = open_store(root.as_uri(), LogConfig(), retention_check_interval_ms=0)
    await store.open()
    return store


async def reopened_clean(root: Path) -> bool:
    """Open the store again and report whether it trusted the marker (skipping CRC checks)."""
    with capture_logs() as logs:
        store = await opened(root)
    await store.close()
    return bool(next(e for e in logs if e["event"] == "log_store.opened")["clean_shutdown"])


async def test_marker_after_every_log_synced(tmp_path: Path, make_batch: BatchBuilder) -> None:
    """A close where every log synced writes the marker, and the next start trusts it."""
    store = await opened(tmp_path)
    for partition in range(3):
        log = await store.create("t", partition)
        await log.append(make_batch([b"a"]))
    await store.close()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert await reopened_clean(tmp_path)


async def test_no_marker_when_a_final_sync_fails(
    tmp_path: Path, make_batch: BatchBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One log's final fsync failing at close leaves no marker: the next start checks CRCs."""
    store = await opened(tmp_path)
    for partition in range(3):
        log = await store.create("t", partition)
        await log.append(make_batch([b"a"]))
    real_sync = FileSegmentData.sync_log

    def failing_sync(self: FileSegmentData) -> None:
        if self.log_path.parent.name == "t-1":
            raise OSError(errno.EIO, "Input/output error")
        real_sync(self)

    monkeypatch.setattr(FileSegmentData, "sync_log", failing_sync)
    with capture_logs() as logs:
        await store.close()
    monkeypatch.undo()
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    events = [e["event"] for e in logs]
    assert "log.final_sync_failed" in events and "log_store.unclean_close" in events
    assert not await reopened_clean(tmp_path)


async def test_no_marker_after_a_failed_write(
    tmp_path: Path, make_batch: BatchBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log whose write failed skips its final sync, so the close leaves no marker."""
    store = await opened(tmp_path)
    healthy = await store.create("t", 0)
    await healthy.append(make_batch([b"a"]))
    broken = await store.create("t", 1)

    def failing_write(*_: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(file_log, "_write_ops", failing_write)
    with pytest.raises(KafkaError):
        await broken.append(make_batch([b"b"]))
    monkeypatch.undo()
    with capture_logs() as logs:
        await store.close()
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert "log.final_sync_skipped" in [e["event"] for e in logs]
    assert not await reopened_clean(tmp_path)
