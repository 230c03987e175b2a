"""The ``file://`` engine's half of compaction: staging cleaned copies and swapping them in.

Everything here blocks; the log calls it in worker threads. For a segment ``<base>``:

1. Stage (while appends go on): write and fsync ``<base>.log.cleaned``, ``<base>.index.cleaned``
   and ``<base>.timeindex.cleaned``.
2. Commit (appends held back): rename the index copies to ``.swap``, then the log copy; an
   existing ``<base>.log.swap`` is the commit point. The directory is fsynced.
3. Replace: rename the index swaps over the indexes, then the log swap over the log (an atomic
   replace each) and open the new log; fsync the directory. The old descriptor still reads the
   old file, so reads on the loop never race the renames; the log closes it once the segment
   list holds the new copy.

A crash before step 2 leaves ``.cleaned`` files (and maybe index swaps) that the next open
deletes; a crash after it leaves swaps the next open finishes (see
:func:`kcoord.storage.file_segment.load_segments`). A segment the cleaner emptied is deleted
instead, its indexes first, so a crash leaves at worst its log, whose indexes are then rebuilt.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kcoord.storage.atomic_file import write_synced
from kcoord.storage.file_segment import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    FileSegmentData,
    fsync_directory,
    index_file_bytes,
)
from kcoord.storage.segment import Segment

__all__ = [
    "FileSwap",
    "discard_cleaned_files",
    "install_cleaned_files",
    "read_segment_file",
    "stage_cleaned_files",
]

FileSwap = tuple[FileSegmentData, FileSegmentData | None]
"""An old segment's files and their cleaned copy, or None when the segment is to be deleted."""


def read_segment_file(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of a segment's log, through a descriptor of its own."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        position = 0
        while position < size:
            chunk = os.pread(fd, size - position, position)
            if not chunk:
                raise OSError(f"{path} ends at {position}, expected {size} bytes")
            chunks.append(chunk)
            position += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def stage_cleaned_files(old: FileSegmentData, data: bytes, rebuilt: Segment) -> FileSegmentData:
    """Step 1: the cleaned copy's files beside ``old``'s; returns the (unopened) files it will become."""
    new = FileSegmentData(old.log_path.parent, old.base_offset)
    offsets, times = index_file_bytes(rebuilt)
    for path, content in ((new.log_path, data), (new.index_path, offsets), (new.time_index_path, times)):
        write_synced(_suffixed(path, CLEANED_SUFFIX), content)
    return new


def discard_cleaned_files(swaps: Sequence[FileSwap]) -> None:
    for _, new in swaps:
        if new is not None:
            for path in _paths(new):
                _suffixed(path, CLEANED_SUFFIX).unlink(missing_ok=True)


def install_cleaned_files(swaps: Sequence[FileSwap]) -> None:
    """Steps 2 and 3 for every segment of one pass."""
    if not swaps:
        return
    directory = swaps[0][0].log_path.parent
    for _, new in swaps:
        if new is not None:
            for path in _paths(new):
                os.replace(_suffixed(path, CLEANED_SUFFIX), _suffixed(path, SWAP_SUFFIX))
    fsync_directory(directory)
    for old, new in swaps:
        if new is None:
            for path in (old.index_path, old.time_index_path, old.log_path):
                path.unlink(missing_ok=True)
            continue
        for path in _paths(new):
            os.replace(_suffixed(path, SWAP_SUFFIX), path)
        new.open_log(create=False)
    fsync_directory(directory)


def _paths(data: FileSegmentData) -> tuple[Path, Path, Path]:
    """The segment's files in commit order: the log last."""
    return data.index_path, data.time_index_path, data.log_path


def _suffixed(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)
