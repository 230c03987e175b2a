"""Compaction on disk (file://): the swap of cleaned segments, reopening, and recovery of a cut-short swap."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from kcoord.protocol.record_batch import parse_header
from kcoord.storage import LogConfig, LogStore, PartitionLog, file_log, open_store
from kcoord.storage.file_compaction import FileSwap, install_cleaned_files

from .helpers import T0_MS
from .test_compaction import append_all, key_batches, log_records, replay

CONFIG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=400,
    index_interval_bytes=64,
    retention_ms=-1,
    flush_policy="interval",
)
Records = list[tuple[int, bytes | None, bytes | None]]


async def opened(root: Path) -> LogStore:
    store = open_store(root.as_uri(), CONFIG, retention_check_interval_ms=0, log_cleaner_backoff_ms=0)
    await store.open()
    return store


def the_log(store: LogStore) -> PartitionLog:
    log = store.get("t", 0)
    assert log is not None
    return log


def names(directory: Path, pattern: str = "*") -> list[str]:
    return sorted(p.name for p in directory.glob(pattern))


async def compact_with_snapshot(
    root: Path, snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Records, Records]:
    """Fill and compact a log under ``root``, copying its directory to ``snapshot`` just before the swap.

    Returns the records before and after compaction.
    """

    def snapshot_then_install(swaps: Sequence[FileSwap]) -> None:
        shutil.copytree(root / "t-0", snapshot)
        install_cleaned_files(swaps)

    monkeypatch.setattr(file_log, "install_cleaned_files", snapshot_then_install)
    store = await opened(root)
    log = await store.create("t", 0)
    await append_all(
        log, [batch for i in range(12) for batch in ([(b"dup", b"%d" % i)], [(b"u%d" % i, b"v")])]
    )
    before = await log_records(log)
    assert await log.compact(T0_MS) is not None
    after = await log_records(log)
    await store.close()
    return before, after


async def reopen_records(root: Path) -> Records:
    store = await opened(root)
    records = await log_records(the_log(store))
    await store.close()
    return records


async def test_a_compacted_log_reopens_with_its_gaps(tmp_path: Path) -> None:
    """After compaction and a reopen the same records read at the same offsets, from the stored indexes."""
    store = await opened(tmp_path)
    log = await store.create("t", 0)
    await append_all(log, key_batches(10))
    files_before = names(tmp_path / "t-0", "*.log")
    await log.compact(T0_MS)
    after = await log_records(log)
    end = log.log_end_offset
    await store.close()
    files_after = names(tmp_path / "t-0", "*.log")
    assert files_after[0] == "00000000000000000000.log" and len(files_after) < len(files_before)
    with capture_logs() as logs:
        again = await opened(tmp_path)
    assert not any(e["event"] == "log.rebuilding_index" for e in logs)
    reopened = the_log(again)
    assert await log_records(reopened) == after and reopened.log_end_offset == end
    survivors = [offset for offset, _, _ in after]
    for offset in range(end):
        header = parse_header(reopened.read(offset, 1))
        assert header.last_offset >= offset and header.base_offset <= next(
            s for s in survivors if s >= offset
        )
    await again.close()
    assert not names(tmp_path / "t-0", "*.cleaned") and not names(tmp_path / "t-0", "*.swap")


async def test_an_uncommitted_copy_is_discarded_at_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash before any .log.swap exists leaves the log as it was before the pass, with no leftovers."""
    snapshot = tmp_path / "crashed" / "t-0"
    before, _ = await compact_with_snapshot(tmp_path / "live", snapshot, monkeypatch)
    assert names(snapshot, "*.log.cleaned")
    index_copy = next(iter(snapshot.glob("*.index.cleaned")))
    os.replace(index_copy, index_copy.with_name(index_copy.name.replace(".cleaned", ".swap")))
    assert await reopen_records(tmp_path / "crashed") == before
    assert not names(snapshot, "*.cleaned") and not names(snapshot, "*.swap")


async def test_a_committed_swap_is_finished_at_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash after the copies became .swap files is completed at open: the cleaned records are read."""
    snapshot = tmp_path / "crashed" / "t-0"
    before, after = await compact_with_snapshot(tmp_path / "live", snapshot, monkeypatch)
    for copy in snapshot.glob("*.cleaned"):
        os.replace(copy, copy.with_name(copy.name.replace(".cleaned", ".swap")))
    first_index_swap = next(iter(snapshot.glob("*.index.swap")))
    os.replace(first_index_swap, first_index_swap.with_name(first_index_swap.name.removesuffix(".swap")))
    with capture_logs() as logs:
        recovered = await reopen_records(tmp_path / "crashed")
    assert any(e["event"] == "log.compaction_swap_completed" for e in logs)
    assert not names(snapshot, "*.swap")
    assert set(after) <= set(recovered) <= set(before)
    assert replay(recovered) == replay(before)
    assert len(recovered) < len(before)


async def test_the_offsets_log_shrinks_to_its_live_keys(tmp_path: Path) -> None:
    """Many commits of the same few keys compact to about one record per key plus the active segment."""
    store = await opened(tmp_path)
    log = await store.create("t", 0)
    await append_all(log, key_batches(60, keys=3))
    size_before = log.size_bytes
    result = await log.compact(T0_MS)
    assert result is not None and result.records_after <= 3
    assert log.size_bytes < size_before // 5
    assert log.segment_count <= 3
    await store.close()
