"""The cluster's producer id counter: every node reserves its blocks of ids from one row.

``producer_id_blocks`` holds the start of the next block. A reservation moves it on by the block
size in one statement (the row lock orders concurrent reservations), so no two nodes, and no two
starts of one node, ever get overlapping blocks. ``floor`` lifts the counter past ids a node handed
out before it joined a cluster (its data directory's file), so they are not issued again.
"""

from __future__ import annotations

import asyncpg

from kcoord.storage.postgres.errors import storage_errors

__all__ = ["PostgresIdReservations"]

_RESERVE = """
INSERT INTO producer_id_blocks AS b (singleton, next_id) VALUES (true, $2::bigint + $1::bigint)
ON CONFLICT (singleton) DO UPDATE SET next_id = greatest(b.next_id, $2::bigint) + $1::bigint
RETURNING b.next_id - $1::bigint
"""


class PostgresIdReservations:
    """Blocks of producer ids reserved in the database a store's pool reaches."""

    def __init__(self, pool: asyncpg.Pool, floor: int = 0) -> None:
        self._pool = pool
        self._floor = floor

    async def reserve(self, size: int) -> int:
        with storage_errors("reserve producer ids"):
            start: int = await self._pool.fetchval(_RESERVE, size, self._floor)
        return start
