"""``fdatasync`` of many files at once through Linux native AIO (``IOCB_CMD_FDSYNC``), in two syscalls.

A group-commit round that appended to thirty partition logs must make each durable. One
``fdatasync`` after the other pays a journal commit each (25 ms for 32 files on this project's
ext4 machine); from a thread pool, every finished call must take the GIL back from the busy event
loop (2.4 ms). ``io_submit`` hands all of them to the kernel in one call, which runs them
concurrently (so ext4's journal batches their commits) while this thread waits in one
``io_getevents`` with the GIL released: 0.9 ms for 32 files. Each is a real ``fdatasync`` of its
file (``vfs_fsync``), so each reports that file's own write-back errors, on any kernel that has
AIO fsync (4.18 and later), and flushes nothing but those files (``syncfs`` would write back
every dirty page on the filesystem, other processes' too). ``bench/run.py sync_rounds`` measures
the ways.

One :class:`AioFdatasync` belongs to one writer (one round at a time) and holds a kernel AIO
context until :meth:`AioFdatasync.close`. Where the kernel or the filesystem has no AIO fsync,
:func:`open_aio_fdatasync` returns None or a call raises :class:`AioUnsupportedError` before anything
was submitted, and the caller syncs another way.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
from collections.abc import Sequence

__all__ = ["AioFdatasync", "AioUnsupportedError", "open_aio_fdatasync"]

_SYS_IO_SETUP = 206
_SYS_IO_DESTROY = 207
_SYS_IO_GETEVENTS = 208
_SYS_IO_SUBMIT = 209
"""x86_64 syscall numbers (the only architecture this module switches on for)."""
_IOCB_CMD_FDSYNC = 3
_DEPTH = 128
"""Requests per ``io_submit``: a round of more files goes in several submissions."""


class _Iocb(ctypes.Structure):
    """``struct iocb`` (little-endian: ``aio_key`` before ``aio_rw_flags``)."""

    _fields_ = (
        ("aio_data", ctypes.c_uint64),
        ("aio_key", ctypes.c_uint32),
        ("aio_rw_flags", ctypes.c_int32),
        ("aio_lio_opcode", ctypes.c_uint16),
        ("aio_reqprio", ctypes.c_int16),
        ("aio_fildes", ctypes.c_uint32),
        ("aio_buf", ctypes.c_uint64),
        ("aio_nbytes", ctypes.c_uint64),
        ("aio_offset", ctypes.c_int64),
        ("aio_reserved2", ctypes.c_uint64),
        ("aio_flags", ctypes.c_uint32),
        ("aio_resfd", ctypes.c_uint32),
    )


class _Event(ctypes.Structure):
    """``struct io_event``."""

    _fields_ = (
        ("data", ctypes.c_uint64),
        ("obj", ctypes.c_uint64),
        ("res", ctypes.c_int64),
        ("res2", ctypes.c_int64),
    )


class AioUnsupportedError(OSError):
    """The kernel refused AIO fsync before any file was submitted: sync these files another way."""


def _libc_syscall() -> ctypes._FuncPointer | None:
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return None
    try:
        syscall = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    return syscall


_SYSCALL = _libc_syscall()


class AioFdatasync:
    """One kernel AIO context; :meth:`sync` fdatasyncs many files at once (one caller at a time)."""

    def __init__(self, context: int, syscall: ctypes._FuncPointer) -> None:
        self._context = ctypes.c_ulong(context)
        self._syscall = syscall

    def sync(self, fds: Sequence[int]) -> None:
        """``fdatasync`` every file of ``fds``; raises ``OSError`` (the first file's error) when any fails."""
        if not self._context.value:
            raise AioUnsupportedError(errno.EBADF, "the AIO context is closed")
        for start in range(0, len(fds), _DEPTH):
            self._sync_some(fds[start : start + _DEPTH], first=start == 0)

    def _sync_some(self, fds: Sequence[int], *, first: bool) -> None:
        count = len(fds)
        iocbs = (_Iocb * count)()
        pointers = (ctypes.POINTER(_Iocb) * count)()
        for index, fd in enumerate(fds):
            iocbs[index].aio_lio_opcode = _IOCB_CMD_FDSYNC
            iocbs[index].aio_fildes = fd
            pointers[index] = ctypes.pointer(iocbs[index])
        submitted, refused = self._submit(pointers, count)
        failure = self._reap(submitted)
        if refused is not None:
            if submitted == 0 and first and refused in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise AioUnsupportedError(refused, f"io_submit (fdsync): {os.strerror(refused)}")
            for fd in fds[submitted:]:
                os.fdatasync(fd)  # what the kernel would not queue; raises that file's error
        if failure is not None:
            raise OSError(failure, f"fdatasync (aio): {os.strerror(failure)}")

    def _submit(self, pointers: ctypes.Array[ctypes._Pointer[_Iocb]], count: int) -> tuple[int, int | None]:
        """Requests queued, and the errno that stopped the rest (None: all queued)."""
        submitted = 0
        while submitted < count:
            rest = ctypes.byref(pointers, submitted * ctypes.sizeof(ctypes.c_void_p))
            got = self._syscall(_SYS_IO_SUBMIT, self._context, ctypes.c_long(count - submitted), rest)
            if got < 0:
                code = ctypes.get_errno()
                if code == errno.EINTR:
                    continue
                return submitted, code
            if got == 0:
                return submitted, errno.EAGAIN
            submitted += got
        return submitted, None

    def _reap(self, count: int) -> int | None:
        """Waits for ``count`` completions; the first failed one's errno (None: all succeeded)."""
        events = (_Event * max(count, 1))()
        done = 0
        failure: int | None = None
        while done < count:
            into = ctypes.byref(events, done * ctypes.sizeof(_Event))
            want = ctypes.c_long(count - done)
            got = self._syscall(_SYS_IO_GETEVENTS, self._context, want, want, into, None)
            if got < 0:
                code = ctypes.get_errno()
                if code == errno.EINTR:
                    continue
                self.close()  # completions left in it would answer a later call: never use it again
                raise OSError(code, f"io_getevents: {os.strerror(code)}")
            done += got
        for event in events[:count]:
            if event.res < 0 and failure is None:
                failure = -event.res
        return failure

    def close(self) -> None:
        """Release the kernel context (nothing is in flight between calls)."""
        if self._context.value:
            self._syscall(_SYS_IO_DESTROY, self._context)
            self._context = ctypes.c_ulong(0)


def open_aio_fdatasync() -> AioFdatasync | None:
    """A new AIO context, or None where there is none to have (not Linux x86_64, or ``io_setup`` fails)."""
    if _SYSCALL is None:
        return None
    context = ctypes.c_ulong(0)
    if _SYSCALL(_SYS_IO_SETUP, ctypes.c_int(_DEPTH), ctypes.byref(context)) != 0:
        return None
    return AioFdatasync(context.value, _SYSCALL)
