"""Producer ids for InitProducerId, handed out of blocks reserved where they cannot repeat.

As Kafka's brokers take blocks of ids from the controller (AllocateProducerIds), a node takes a
block of :data:`ID_BLOCK_SIZE` ids from a :class:`IdReservations` and hands them out one by one:

- alone (``file://``, ``memory://``, or one node over PostgreSQL), the start of the *next* block
  is written and fsynced to ``<data dir>/producer_ids`` (:class:`FileIdReservations`, in a worker
  thread) before the first id of a block is given, so ids never repeat across restarts, even after
  a crash (at most one block is skipped);
- in a cluster, every node reserves from one counter in PostgreSQL
  (:class:`kcoord.storage.postgres.producer_ids.PostgresIdReservations`), so two nodes never hand
  out the same id.

The reservation is awaited, never run on the event loop; one reservation at a time. A reservation
that fails answers COORDINATOR_LOAD_IN_PROGRESS, what Kafka answers while its next block has not
arrived, so the client retries.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Protocol

import structlog

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.atomic_file import write_atomically

__all__ = ["ID_BLOCK_FILE", "ID_BLOCK_SIZE", "FileIdReservations", "IdReservations", "ProducerIdBlocks"]

log = structlog.get_logger(__name__)

ID_BLOCK_FILE = "producer_ids"
ID_BLOCK_SIZE = 1000


class IdReservations(Protocol):
    """Where blocks of producer ids are reserved."""

    async def reserve(self, size: int) -> int:
        """The first id of ``size`` ids never reserved before (durably recorded before it returns)."""
        ...


class FileIdReservations:
    """Blocks reserved in one node's data directory: the file holds the start of the next block."""

    def __init__(self, path: Path) -> None:
        self._path = Path(path)

    async def reserve(self, size: int) -> int:
        return await asyncio.to_thread(self._reserve, size)

    def reserved(self) -> int:
        """The start of the next block the file gives (0 when there is no file yet); blocking."""
        try:
            text = self._path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        return int(text)

    def _reserve(self, size: int) -> int:
        start = self.reserved()
        write_atomically(self._path, f"{start + size}\n".encode("ascii"))
        return start


class ProducerIdBlocks:
    """Hands out the ids of the current block, reserving the next block when it runs out."""

    def __init__(self, reservations: IdReservations, block_size: int = ID_BLOCK_SIZE) -> None:
        self._reservations = reservations
        self._block_size = block_size
        self._next = self._end = 0
        self._lock = asyncio.Lock()

    @property
    def block_size(self) -> int:
        return self._block_size

    async def next_id(self) -> int:
        """A producer id no InitProducerId got before, on this node or (in a cluster) any other."""
        if self._next >= self._end:
            async with self._lock:
                if self._next >= self._end:
                    await self._take_block()
        producer_id = self._next
        self._next += 1
        return producer_id

    async def _take_block(self) -> None:
        try:
            start = await self._reservations.reserve(self._block_size)
        except (KafkaError, OSError) as exc:
            log.warning("producer_ids.reserve_failed", error=str(exc) or type(exc).__name__)
            raise KafkaError(
                ErrorCode.coordinator_load_in_progress, "the next block of producer ids is not reserved yet"
            ) from exc
        self._next, self._end = start, start + self._block_size
        log.info("producer_ids.block_reserved", first=start, size=self._block_size)
