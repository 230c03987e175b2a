"""One process per store: the data directory's lock file, and the error a start refused by a holder raises.

As Kafka's ``.lock`` in each log directory: ``.lock`` is opened (created when missing) and locked with
``flock(LOCK_EX | LOCK_NB)``, and held open for the life of the process. The kernel drops the lock when
the process ends, however it ends, so a crash never leaves a stale lock behind. The file is never removed:
unlinking it while another process may be opening it would let two processes lock two different files.

A node takes this lock before it writes anything in its data directory (its identity, its logs, the clean
shutdown marker); a second ``kcoord serve`` on the same directory is refused without having read or
written a byte of it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_FILE", "DataDirLock", "StoreHeldError"]

LOCK_FILE = ".lock"


class StoreHeldError(Exception):
    """Another process holds what this one needs (its data directory, its database, its node id).

    The message is the one line the operator sees; ``kcoord serve`` exits with the data-directory code.
    """


class DataDirLock:
    """The exclusive lock on ``data_dir`` (blocking calls: run them off the event loop)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Lock the directory, or raise :class:`StoreHeldError` at once when another process holds it."""
        if self._fd is not None:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StoreHeldError(
                    f"data directory {self.data_dir} is in use by another kcoord process"
                    f" (it holds {self.path})"
                ) from None
            raise
        self._fd = fd

    def release(self) -> None:
        """Unlock (the file stays: see the module docstring)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
