"""Segment files of the ``file://`` engine, and their recovery. Everything here blocks: call it off the loop.

A partition directory ``<data>/<topic>-<partition>/`` holds, per segment, named by the base
offset padded to 20 digits:

- ``.log``: the batches, stored as appended;
- ``.index``: sparse offset index, 8-byte entries (offset - base i32, position i32);
- ``.timeindex``: sparse time index, 12-byte entries (timestamp i64, offset - base i32).

Index files are written as batches are, but only fsynced when a segment is sealed (rolled) or
the log is closed; the active segment's indexes are always rebuilt from its batches at open,
and a sealed segment whose index files do not look sane is rebuilt the same way.

Compaction stages a segment's cleaned copy as ``.cleaned`` files and commits it by renaming them
to ``.swap`` and then over the originals (:mod:`kcoord.storage.file_compaction`); opening a
directory first finishes a committed swap a crash cut short and discards uncommitted copies.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from kcoord.storage.segment import Placement, Segment, scan_segment

__all__ = [
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "FileSegmentData",
    "index_file_bytes",
    "load_segments",
    "segment_paths",
]

logger = structlog.get_logger(__name__)

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_IOV_MAX = 1024
_LOG_SUFFIX = ".log"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def segment_paths(directory: Path, base_offset: int) -> tuple[Path, Path, Path]:
    stem = f"{base_offset:020d}"
    return directory / f"{stem}.log", directory / f"{stem}.index", directory / f"{stem}.timeindex"


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileSegmentData:
    """The three files of one segment. The log fd stays open for reads; index fds only while active."""

    def __init__(self, directory: Path, base_offset: int) -> None:
        self.base_offset = base_offset
        self.log_path, self.index_path, self.time_index_path = segment_paths(directory, base_offset)
        self.fd = -1
        self.index_fd = -1
        self.time_index_fd = -1

    def read_at(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def open_log(self, *, create: bool) -> None:
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(self.log_path, flags, 0o644)

    def open_indexes(self) -> None:
        """Open the index files for appending (the segment is, or again is, the active one)."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        if self.index_fd < 0:
            self.index_fd = os.open(self.index_path, flags, 0o644)
        if self.time_index_fd < 0:
            self.time_index_fd = os.open(self.time_index_path, flags, 0o644)

    def write_log(self, chunks: Sequence[bytes]) -> None:
        for start in range(0, len(chunks), _IOV_MAX):
            _write_fully(self.fd, list(chunks[start : start + _IOV_MAX]))

    def write_index_entries(self, base_offset: int, placements: Sequence[Placement]) -> None:
        offsets = [
            _OFFSET_ENTRY.pack(p.base_offset - base_offset, p.position) for p in placements if p.indexed
        ]
        times = [
            _TIME_ENTRY.pack(p.time_entry[0], p.time_entry[1] - base_offset)
            for p in placements
            if p.time_entry is not None
        ]
        if offsets:
            _write_fully(self.index_fd, [b"".join(offsets)])
        if times:
            _write_fully(self.time_index_fd, [b"".join(times)])

    def write_time_entry(self, entry: tuple[int, int]) -> None:
        _write_fully(self.time_index_fd, [_TIME_ENTRY.pack(entry[0], entry[1] - self.base_offset)])

    def sync_log(self) -> None:
        os.fdatasync(self.fd)

    def sync_indexes(self) -> None:
        for fd in (self.index_fd, self.time_index_fd):
            if fd >= 0:
                os.fdatasync(fd)

    def close_indexes(self) -> None:
        for fd in (self.index_fd, self.time_index_fd):
            if fd >= 0:
                os.close(fd)
        self.index_fd = self.time_index_fd = -1

    def close(self) -> None:
        self.close_indexes()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)

    def rewrite_indexes(self, segment: Segment) -> None:
        """Replace both index files with ``segment``'s in-memory entries."""
        offsets, times = index_file_bytes(segment)
        reopen = self.index_fd >= 0
        self.close_indexes()
        self.index_path.write_bytes(offsets)
        self.time_index_path.write_bytes(times)
        if reopen:
            self.open_indexes()


def index_file_bytes(segment: Segment) -> tuple[bytes, bytes]:
    """The contents of ``segment``'s ``.index`` and ``.timeindex`` files, from its in-memory entries."""
    base = segment.base_offset
    offsets = b"".join(
        _OFFSET_ENTRY.pack(o - base, p)
        for o, p in zip(segment.index_offsets, segment.index_positions, strict=True)
    )
    times = b"".join(
        _TIME_ENTRY.pack(t, o - base)
        for t, o in zip(segment.time_timestamps, segment.time_offsets, strict=True)
    )
    return offsets, times


def _write_fully(fd: int, chunks: list[bytes]) -> None:
    while chunks:
        written = os.writev(fd, chunks)
        while chunks and written >= len(chunks[0]):
            written -= len(chunks[0])
            chunks.pop(0)
        if chunks and written:
            chunks[0] = memoryview(chunks[0])[written:].tobytes()


def load_segments(
    directory: Path,
    topic: str,
    partition: int,
    *,
    index_interval_bytes: int,
    now_ms: int,
    clean_shutdown: bool,
) -> list[Segment]:
    """Open every segment of a partition directory, recovering the active (last) one.

    The last segment is rescanned (with CRC checks unless the store was shut down cleanly) and
    a torn or corrupt tail is cut off; a sealed segment is loaded from its index files, or
    rescanned when they look damaged. An empty directory gets a first segment at offset 0.
    """
    _finish_interrupted_swaps(directory)
    bases = sorted(
        int(p.name[: -len(_LOG_SUFFIX)])
        for p in directory.glob(f"*{_LOG_SUFFIX}")
        if p.name[: -len(_LOG_SUFFIX)].isdigit()
    )
    if not bases:
        data = FileSegmentData(directory, 0)
        data.open_log(create=True)
        data.open_indexes()
        fsync_directory(directory)
        return [Segment(0, data, index_interval_bytes, now_ms)]
    segments: list[Segment] = []
    for i, base in enumerate(bases):
        data = FileSegmentData(directory, base)
        data.open_log(create=False)
        file_size = os.fstat(data.fd).st_size
        if i + 1 < len(bases):
            segment = _load_sealed(data, file_size, bases[i + 1], index_interval_bytes, now_ms)
        else:
            segment = _recover_active(
                data, file_size, topic, partition, index_interval_bytes, now_ms, verify_crc=not clean_shutdown
            )
        segments.append(segment)
    return segments


def _finish_interrupted_swaps(directory: Path) -> None:
    """Complete or discard a compaction swap that a crash cut short.

    ``*.cleaned`` files were never committed: deleted. A ``<base>.log.swap`` was committed: its
    index swaps (renamed before it) and then itself replace the segment's files. Index swaps left
    without a log swap belong to an uncommitted copy: deleted.
    """
    changed = False
    for path in directory.glob(f"*{CLEANED_SUFFIX}"):
        path.unlink()
        changed = True
    for log_swap in sorted(directory.glob(f"*{_LOG_SUFFIX}{SWAP_SUFFIX}")):
        stem = log_swap.name[: -len(_LOG_SUFFIX + SWAP_SUFFIX)]
        for suffix in (".index", ".timeindex"):
            index_swap = directory / f"{stem}{suffix}{SWAP_SUFFIX}"
            if index_swap.exists():
                os.replace(index_swap, directory / f"{stem}{suffix}")
        os.replace(log_swap, directory / f"{stem}{_LOG_SUFFIX}")
        logger.warning("log.compaction_swap_completed", file=str(directory / f"{stem}{_LOG_SUFFIX}"))
        changed = True
    for path in directory.glob(f"*{SWAP_SUFFIX}"):
        path.unlink()
        changed = True
    if changed:
        fsync_directory(directory)


def _load_sealed(
    data: FileSegmentData, file_size: int, next_base: int, index_interval_bytes: int, now_ms: int
) -> Segment:
    segment = Segment(data.base_offset, data, index_interval_bytes, now_ms)
    indexes = _read_indexes(data, file_size, next_base)
    if indexes is not None:
        segment.load_state(file_size, next_base, *indexes)
        return segment
    logger.warning("log.rebuilding_index", file=str(data.log_path))
    return _rescan(data, file_size, index_interval_bytes, now_ms, verify_crc=False)


def _rescan(
    data: FileSegmentData,
    file_size: int,
    index_interval_bytes: int,
    now_ms: int,
    *,
    verify_crc: bool,
    progress: Callable[[int], None] | None = None,
) -> Segment:
    """The segment's state read from its file's batches (up to the first invalid one), with both
    index files written afresh from it."""
    segment = scan_segment(
        data.base_offset,
        data,
        file_size,
        index_interval_bytes=index_interval_bytes,
        created_ms=now_ms,
        verify_crc=verify_crc,
        progress=progress,
    )
    data.rewrite_indexes(segment)
    return segment


def _read_indexes(
    data: FileSegmentData, file_size: int, next_base: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """Both index files as absolute entries, or None when missing or not plausible."""
    try:
        raw_offsets = data.index_path.read_bytes()
        raw_times = data.time_index_path.read_bytes()
    except FileNotFoundError:
        return None
    if len(raw_offsets) % _OFFSET_ENTRY.size or len(raw_times) % _TIME_ENTRY.size:
        return None
    base = data.base_offset
    offsets = [(base + rel, pos) for rel, pos in _OFFSET_ENTRY.iter_unpack(raw_offsets)]
    times = [(ts, base + rel) for ts, rel in _TIME_ENTRY.iter_unpack(raw_times)]
    if offsets and (offsets[-1][1] >= file_size or offsets[-1][0] >= next_base):
        return None
    if times and times[-1][1] >= next_base:
        return None
    if file_size > 0 and not times:
        return None
    return offsets, times


def _recover_active(
    data: FileSegmentData,
    file_size: int,
    topic: str,
    partition: int,
    index_interval_bytes: int,
    now_ms: int,
    *,
    verify_crc: bool,
) -> Segment:
    segment_log = logger.bind(topic=topic, partition=partition, file=str(data.log_path))

    def progress(position: int) -> None:
        segment_log.info("log.recovery_progress", scanned_bytes=position, total_bytes=file_size)

    segment = _rescan(data, file_size, index_interval_bytes, now_ms, verify_crc=verify_crc, progress=progress)
    if segment.size < file_size:
        os.ftruncate(data.fd, segment.size)
        os.fsync(data.fd)
        segment_log.warning(
            "log.truncated_torn_tail",
            bytes_dropped=file_size - segment.size,
            valid_end_offset=segment.next_offset,
        )
    data.open_indexes()
    return segment
