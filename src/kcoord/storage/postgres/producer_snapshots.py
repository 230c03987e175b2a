"""Each partition's idempotent-producer snapshot, kept beside its log so the next owner finds it.

A snapshot is opaque bytes (encoded by :mod:`kcoord.cluster.producer_snapshots`) standing for the
producer state of the log below ``snapshot_offset``. Only the partition's current owner writes it:
the write names the owner epoch its log writes under and is a no-op when the database holds
another, so a fenced node never overwrites its successor's snapshot. Rows go with the partition
(``ON DELETE CASCADE``).
"""

from __future__ import annotations

import asyncpg

from kcoord.storage.postgres.errors import storage_errors

__all__ = ["PostgresProducerSnapshots"]

_WRITE = """
INSERT INTO producer_snapshots AS s (topic, partition_id, snapshot_offset, owner_epoch, data)
SELECT p.topic, p.partition_id, $3, $4, $5 FROM log_partitions p
WHERE p.topic = $1 AND p.partition_id = $2 AND p.owner_epoch = $4
ON CONFLICT (topic, partition_id) DO UPDATE
    SET snapshot_offset = excluded.snapshot_offset, owner_epoch = excluded.owner_epoch,
        data = excluded.data, written_at = now()
RETURNING 1
"""


class PostgresProducerSnapshots:
    """Reads and writes the ``producer_snapshots`` rows of one database."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def read(self, topic: str, partition: int) -> bytes | None:
        """The partition's snapshot, or None when none was written."""
        with storage_errors("read producer snapshot"):
            data: bytes | None = await self._pool.fetchval(
                "SELECT data FROM producer_snapshots WHERE topic = $1 AND partition_id = $2",
                topic,
                partition,
            )
        return data

    async def write(self, topic: str, partition: int, owner_epoch: int, offset: int, data: bytes) -> bool:
        """Store the snapshot if ``owner_epoch`` is still the partition's; whether it was stored."""
        with storage_errors("write producer snapshot"):
            stored = await self._pool.fetchval(_WRITE, topic, partition, offset, owner_epoch, data)
        return stored is not None
