"""A bound on the bytes of requests being read and processed: Kafka's ``queued.max.request.bytes``.

A connection reserves a frame's size from the pool once it has read the frame's size and before it
reads the body; it gives the bytes back once the request is answered. A frame that does not fit
waits, and while it waits its connection reads nothing more, so the socket's receive window fills
and the client stops sending. Reservations are granted in arrival order, so a large frame is not
starved by a stream of small ones. A frame larger than the whole pool is admitted only when the pool
is empty (Kafka's pool lets one request overshoot in the same way), so the bytes held never exceed
``max(capacity, largest frame)``.
"""

from __future__ import annotations

import asyncio
from collections import deque


class MemoryPool:
    """Counts reserved bytes against a capacity; ``capacity <= 0`` means unbounded."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def bounded(self) -> bool:
        return self.capacity > 0

    @property
    def waiting(self) -> int:
        """Frames waiting for memory."""
        return len(self._waiters)

    def _fits(self, size: int) -> bool:
        return self.used == 0 or self.used + size <= self.capacity

    def try_reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes now if they fit and nobody is waiting ahead."""
        if not self.bounded:
            self.used += size
            return True
        if self._waiters or not self._fits(size):
            return False
        self.used += size
        return True

    async def reserve(self, size: int) -> None:
        """Wait until ``size`` bytes are reserved for the caller."""
        if self.try_reserve(size):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, future)
        self._waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(size)
            else:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                self._wake()
            raise

    def release(self, size: int) -> None:
        self.used -= size
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            size, future = self._waiters[0]
            if future.done():
                self._waiters.popleft()
                continue
            if not self._fits(size):
                return
            self._waiters.popleft()
            self.used += size
            future.set_result(None)
