"""Making the files of one group-commit round durable: ``fdatasync`` of each, all at once.

A round that touched many partition logs would pay one journal commit per ``fdatasync`` issued
one after the other. :class:`DurableSync` (one per writer) hands every file of a round to the
kernel in one AIO submission (:mod:`kcoord.storage.aio_fdatasync`): the fdatasyncs run
concurrently, ext4 commits its journal once for them, and each file reports its own write-back
errors. A round that touched a single file calls ``fdatasync`` directly.

Where there is no AIO fsync (another kernel, architecture or filesystem), :func:`sync_files`
does the round: one ``syncfs(2)`` per filesystem, which writes back and commits everything
dirty on it at once. ``syncfs`` reports write-back errors only since Linux 5.8, so it is used
only on such kernels (and where libc has it); otherwise each file is ``fdatasync``-ed in turn.
``syncfs`` also writes back other processes' dirty pages on the same filesystem (its time, and
its tail, grow with theirs), which is why it is the fallback rather than the first choice.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from collections.abc import Callable, Sequence

from kcoord.storage.aio_fdatasync import AioFdatasync, AioUnsupportedError, open_aio_fdatasync

__all__ = ["DurableSync", "SyncFiles", "SyncFs", "sync_files", "syncfs_available"]

SyncFs = Callable[[int], None]
SyncFiles = Callable[[Sequence[int]], None]


def _load_syncfs() -> SyncFs | None:
    if platform.system() != "Linux" or _kernel_version() < (5, 8):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        raw = libc.syncfs
    except (OSError, AttributeError):
        return None
    raw.argtypes = [ctypes.c_int]
    raw.restype = ctypes.c_int

    def syncfs(fd: int) -> None:
        if raw(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"syncfs: {os.strerror(errno)}")

    return syncfs


def _kernel_version() -> tuple[int, int]:
    parts = platform.release().split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (IndexError, ValueError):
        return (0, 0)


_SYNCFS = _load_syncfs()


def syncfs_available() -> bool:
    """Whether rounds of several files use one ``syncfs`` per filesystem."""
    return _SYNCFS is not None


def sync_files(fds: Sequence[int], syncfs: SyncFs | None = _SYNCFS) -> None:
    """Make everything written to ``fds`` durable; raises ``OSError`` when that fails."""
    if len(fds) == 1 or syncfs is None:
        for fd in fds:
            os.fdatasync(fd)
        return
    by_device: dict[int, int] = {}
    for fd in fds:
        by_device.setdefault(os.fstat(fd).st_dev, fd)
    for fd in by_device.values():
        syncfs(fd)


class DurableSync:
    """One writer's round sync: ``fdatasync`` of every file at once through AIO, else :func:`sync_files`.

    Called from the writer's thread, one round at a time; :meth:`close` when the writer stops. The
    kernel AIO context is made at the first round of several files (a store that never has one
    holds none; contexts are a system-wide budget, ``fs.aio-max-nr``); where none can be made, or
    the kernel refuses AIO fsync, rounds go to the fallback from then on.
    """

    def __init__(
        self,
        *,
        fallback: SyncFiles = sync_files,
        open_aio: Callable[[], AioFdatasync | None] = open_aio_fdatasync,
    ) -> None:
        self._fallback = fallback
        self._open_aio: Callable[[], AioFdatasync | None] | None = open_aio
        self._aio: AioFdatasync | None = None

    @property
    def uses_aio(self) -> bool:
        """Whether the last round of several files went through AIO (False before any, and after close)."""
        return self._aio is not None

    def __call__(self, fds: Sequence[int]) -> None:
        """Make everything written to ``fds`` durable; raises ``OSError`` when that fails."""
        if len(fds) == 1:
            os.fdatasync(fds[0])
            return
        if self._aio is None and self._open_aio is not None:
            self._aio, self._open_aio = self._open_aio(), None
        if self._aio is not None:
            try:
                self._aio.sync(fds)
                return
            except AioUnsupportedError:
                self.close()
        self._fallback(fds)

    def close(self) -> None:
        self._open_aio = None
        if self._aio is not None:
            self._aio.close()
            self._aio = None
