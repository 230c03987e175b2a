"""The round sync: several real files are fdatasync-ed at once through AIO (in chunks past its depth),
a failing file surfaces as OSError, and without AIO the round falls back to the syncfs/fdatasync path."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from kcoord.storage.aio_fdatasync import open_aio_fdatasync
from kcoord.storage.durable_sync import DurableSync

AIO_EXPECTED = platform.system() == "Linux" and platform.machine() == "x86_64"


@pytest.fixture
def written_files(tmp_path: Path) -> Iterator[list[int]]:
    """Descriptors of 140 files with a record each not yet synced (more than one AIO submission holds)."""
    fds = [os.open(tmp_path / f"log-{i}", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644) for i in range(140)]
    try:
        for fd in fds:
            os.write(fd, b"record")
        yield fds
    finally:
        for fd in fds:
            os.close(fd)


class RecordingFallback:
    """Stands in for the syncfs/fdatasync path: records the descriptors each call covered."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def __call__(self, fds: Sequence[int]) -> None:
        self.calls.append(list(fds))


def test_several_files_sync_through_aio_without_the_fallback(written_files: list[int]) -> None:
    """Where AIO fsync exists, a round of many files never reaches the syncfs fallback (and a lone
    file never makes an AIO context); after close, rounds take the fallback."""
    fallback = RecordingFallback()
    sync = DurableSync(fallback=fallback)
    try:
        sync(written_files[:1])
        assert not sync.uses_aio
        sync(written_files)
        sync(written_files[:2])
        assert sync.uses_aio == AIO_EXPECTED
        assert fallback.calls == ([] if AIO_EXPECTED else [written_files, written_files[:2]])
    finally:
        sync.close()
    assert not sync.uses_aio
    sync(written_files[:3])
    assert fallback.calls[-1] == written_files[:3]


def test_aio_fdatasync_covers_more_files_than_one_submission(written_files: list[int]) -> None:
    """140 files (past the 128 one submission takes) all sync in one call; a closed context refuses."""
    aio = open_aio_fdatasync()
    assert (aio is not None) == AIO_EXPECTED
    if aio is None:
        return
    aio.sync(written_files)
    aio.close()
    with pytest.raises(OSError, match="closed"):
        aio.sync(written_files)


def test_a_bad_descriptor_among_several_fails_the_round(tmp_path: Path, written_files: list[int]) -> None:
    """A descriptor that is not open fails the round's sync with OSError, through AIO or the fallback."""
    closed = os.open(tmp_path / "gone", os.O_CREAT | os.O_WRONLY)
    os.close(closed)
    sync = DurableSync()
    try:
        with pytest.raises(OSError):
            sync([*written_files[:3], closed, *written_files[3:6]])
        sync(written_files[:6])  # the context is still usable after a failed round
    finally:
        sync.close()


def test_without_aio_several_files_take_the_fallback_and_one_file_is_fdatasynced(
    written_files: list[int],
) -> None:
    """A sync that gets no AIO context hands rounds of several files to the fallback, a lone file not."""
    fallback = RecordingFallback()
    sync = DurableSync(fallback=fallback, open_aio=lambda: None)
    sync(written_files[:4])
    sync(written_files[:1])
    assert fallback.calls == [written_files[:4]]
    assert not sync.uses_aio
