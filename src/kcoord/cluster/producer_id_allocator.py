"""Producer ids for the transaction coordinator, handed out without waiting.

The coordinator's shard is synchronous (it runs on the event loop inside one partition's serial
runner), but ids come in blocks reserved on disk or in PostgreSQL, which takes an await
(:mod:`kcoord.cluster.producer_ids`). :class:`ReadyProducerIds` keeps a few ids taken ahead from
the producer state's blocks and refills them in the background when they run low. When none is
ready (the very first InitProducerIds after a start, or a reservation that fails) it raises
COORDINATOR_LOAD_IN_PROGRESS, as Kafka's ``ProducerIdManager`` does while its next block has not
arrived, and the client retries.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable

import structlog

from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = ["ReadyProducerIds"]

log = structlog.get_logger(__name__)

DEFAULT_READY_IDS = 32


class ReadyProducerIds:
    """A :class:`~kcoord.coordinator.transactions.ProducerIdAllocator` over an async id source."""

    def __init__(self, source: Callable[[], Awaitable[int]], *, ready: int = DEFAULT_READY_IDS) -> None:
        self._source = source
        self._target = ready
        self._ids: deque[int] = deque()
        self._refill: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Take the first ids ahead (in the background)."""
        self._maybe_refill()

    def next_producer_id(self) -> int:
        """The next ready id; raises COORDINATOR_LOAD_IN_PROGRESS when none is ready yet."""
        self._maybe_refill()
        if not self._ids:
            raise KafkaError(ErrorCode.coordinator_load_in_progress, "no producer id is ready yet")
        producer_id = self._ids.popleft()
        self._maybe_refill()
        return producer_id

    @property
    def ready(self) -> int:
        return len(self._ids)

    def _maybe_refill(self) -> None:
        if len(self._ids) > self._target // 2 or (self._refill is not None and not self._refill.done()):
            return
        with contextlib.suppress(RuntimeError):  # no running loop: nothing to refill with yet
            self._refill = asyncio.get_running_loop().create_task(self._fill())

    async def _fill(self) -> None:
        try:
            while len(self._ids) < self._target:
                self._ids.append(await self._source())
        except KafkaError as exc:
            log.warning("producer_ids.not_ready", error=exc.message or exc.code.name)

    async def stop(self) -> None:
        if self._refill is not None:
            self._refill.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refill
