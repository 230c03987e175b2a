"""The thread where client regular expressions are matched, off the event loop, and its lifecycle.

RE2 matches in linear time and lets go of the GIL, but a crafted pattern costs about a second per
32 KiB of text (:mod:`kcoord.coordinator.client_regex`). Matched on the event loop it would hold
every connection; matched on the default executor it would hold the threads storage uses. So the
matching runs on one thread of its own, one job after another: a client that sends such patterns
delays only other pattern matches.

The app makes one worker, hands it to the APIs that match patterns, and closes it when it stops
(after the listener drained): jobs still queued are cancelled, the one running is waited for, and
a job submitted after that is refused with ``RuntimeError``. The thread starts with the first job.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, TypeVarTuple

__all__ = ["THREAD_NAME", "PatternWorker"]

THREAD_NAME = "kcoord-pattern"

_T = TypeVar("_T")
_Args = TypeVarTuple("_Args")


class PatternWorker:
    """One worker thread for pattern matching, started on first use and stopped by :meth:`close`."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=THREAD_NAME)

    async def run(self, job: Callable[[*_Args], _T], *args: *_Args) -> _T:
        """``job(*args)`` on the worker thread, after the jobs before it."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, job, *args)

    async def close(self) -> None:
        """Cancel the queued jobs, wait for the running one, and stop the thread."""
        shutdown = functools.partial(self._executor.shutdown, wait=True, cancel_futures=True)
        await asyncio.get_running_loop().run_in_executor(None, shutdown)
