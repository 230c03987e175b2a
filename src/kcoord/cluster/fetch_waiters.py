"""Waking a long-polling Fetch the moment any of its partitions gets data.

The logs call their append listeners when appended data becomes readable
(:meth:`kcoord.storage.api.PartitionLog.add_append_listener`). An :class:`AppendWatch` registers
one listener per watched log, all setting the same event, so a waiting Fetch wakes at once on a
produce to any fetched partition and otherwise sleeps until its deadline: no polling loop, and
nothing runs for a Fetch while it waits. Leaving the ``with`` block unregisters the listeners,
also when the Fetch is cancelled because its connection closed.

A read_committed Fetch also watches its partitions' last stable offsets (``also``: functions that
register a listener and return its unregistration, such as
:meth:`kcoord.cluster.producer_state.ProducerStateManager.watch_stable`): a transaction's marker
is readable before the LSO moves past it, so the append alone would wake the Fetch too early.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from types import TracebackType

from kcoord.storage.api import AppendListener, PartitionLog

__all__ = ["AppendWatch", "ListenerRegistration"]

ListenerRegistration = Callable[[AppendListener], Callable[[], None]]
"""Registers a listener somewhere and returns the function that unregisters it."""


class AppendWatch:
    def __init__(self, logs: Iterable[PartitionLog], also: Iterable[ListenerRegistration] = ()) -> None:
        self._logs = list(logs)
        self._also = list(also)
        self._appended = asyncio.Event()
        self._unregister: list[Callable[[], None]] = []

    def __enter__(self) -> AppendWatch:
        for partition_log in self._logs:
            self._unregister.append(partition_log.add_append_listener(self._on_append))
        for register in self._also:
            self._unregister.append(register(self._on_append))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for unregister in self._unregister:
            unregister()
        self._unregister.clear()

    def _on_append(self, end_offset: int) -> None:
        self._appended.set()

    async def wait(self, timeout_s: float) -> bool:
        """True when data was appended to a watched log (since the last wait), False on timeout."""
        if timeout_s <= 0:
            return self._take()
        try:
            async with asyncio.timeout(timeout_s):
                await self._appended.wait()
        except TimeoutError:
            return self._take()
        return self._take()

    def _take(self) -> bool:
        appended = self._appended.is_set()
        self._appended.clear()
        return appended
