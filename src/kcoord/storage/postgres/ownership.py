"""Nodes with leases and the owner of every partition, kept in PostgreSQL beside the logs.

A node registers its id and advertised address in ``cluster_nodes`` with a lease measured on the
database's clock (``now()``), so nodes never compare their own clocks. A node is live while its
lease has not expired; a node that stops renewing is gone once it lapses.

Each registration carries the registering process's random *incarnation* (as KRaft's broker
registrations do). Renewing, claiming, releasing and deregistering all name it, so once another
process has registered the id (after this one's lease lapsed: it was paused, say) this one can do
none of them: it cannot renew the other's lease, claim or release partitions as the id, or delete
the other's row. It learns it was taken over from :meth:`Ownership.holder` and steps down.

Each row of ``log_partitions`` names its owner (``owner_node``) and an ``owner_epoch`` that grows
on every claim. A claim succeeds only when the partition has no owner, is this node's own (a
restarted node fences its former self), or its owner's lease has lapsed; the epoch it returns is
the one the claimer's log writes under, checked by every commit round
(:mod:`kcoord.storage.postgres.committer`). A release (a clean shutdown, or a partition that moves
to a node that joined) clears the owner at once, so the next owner need not wait for a lease.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from kcoord.storage.postgres.errors import storage_errors

__all__ = ["EpochStart", "LiveNode", "Ownership", "OwnershipMove", "PartitionOwner", "Registration"]


@dataclass(frozen=True, slots=True)
class EpochStart:
    """A leader epoch of a partition and the offset its first append took (the log end at its claim)."""

    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class LiveNode:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Registration:
    """Who holds a node id: the incarnation that registered it, and its lease (ms on the database's
    clock, which only ever grows while that incarnation renews)."""

    incarnation: uuid.UUID | None
    lease_expires_at_ms: int
    live: bool


@dataclass(frozen=True, slots=True)
class OwnershipMove:
    """One claim of a partition: who took it (from whom), under which epoch, when (epoch ms)."""

    epoch: int
    node_id: int
    previous_node: int | None
    moved_at_ms: int


@dataclass(frozen=True, slots=True)
class PartitionOwner:
    topic: str
    partition: int
    node_id: int | None
    epoch: int


_LIVE = "lease_expires_at > now()"

_REGISTER = f"""
INSERT INTO cluster_nodes AS n (node_id, host, port, lease_expires_at, incarnation)
VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond', $5)
ON CONFLICT (node_id) DO UPDATE
    SET host = excluded.host, port = excluded.port, lease_expires_at = excluded.lease_expires_at,
        registered_at = now(), incarnation = excluded.incarnation
    WHERE NOT n.{_LIVE}
RETURNING node_id
"""

_RENEW = f"""
UPDATE cluster_nodes SET lease_expires_at = now() + $2 * interval '1 millisecond'
WHERE node_id = $1 AND incarnation = $3 AND {_LIVE}
RETURNING node_id
"""

_MINE = "EXISTS (SELECT 1 FROM cluster_nodes me WHERE me.node_id = $1 AND me.incarnation = $4)"
"""This incarnation still holds the node id ($1: the id, $4: the incarnation)."""
_MINE_AND_LIVE = (
    f"EXISTS (SELECT 1 FROM cluster_nodes me WHERE me.node_id = $1 AND me.incarnation = $4 AND me.{_LIVE})"
)

_CLAIM = f"""
WITH claimed AS (
    UPDATE log_partitions AS p SET owner_node = $1, owner_epoch = p.owner_epoch + 1
    WHERE p.topic = $2 AND p.partition_id = $3
      AND {_MINE_AND_LIVE}
      AND (p.owner_node IS NULL OR p.owner_node = $1
           OR NOT EXISTS (SELECT 1 FROM cluster_nodes o WHERE o.node_id = p.owner_node AND o.{_LIVE}))
    RETURNING p.owner_epoch
), moved AS (
    INSERT INTO ownership_moves (topic, partition_id, epoch, node_id, previous_node)
    SELECT $2, $3, c.owner_epoch, $1,
           (SELECT m.node_id FROM ownership_moves m WHERE m.topic = $2 AND m.partition_id = $3
            ORDER BY m.epoch DESC LIMIT 1)
    FROM claimed c
)
SELECT owner_epoch FROM claimed
"""


class Ownership:
    """The cluster tables of one database, reached through a store's pool, as one process (one
    incarnation, random unless given) sees them."""

    def __init__(self, pool: asyncpg.Pool, incarnation: uuid.UUID | None = None) -> None:
        self._pool = pool
        self.incarnation = incarnation or uuid.uuid4()

    async def cluster_id(self, proposed: str) -> str:
        """The cluster's id: ``proposed`` if this is the first node ever, else the one stored."""
        with storage_errors("cluster id"):
            async with self._pool.acquire() as connection, connection.transaction():
                await connection.execute(
                    "INSERT INTO cluster_meta (key, value) VALUES ('cluster.id', $1) ON CONFLICT DO NOTHING",
                    proposed,
                )
                stored: str = await connection.fetchval(
                    "SELECT value FROM cluster_meta WHERE key = 'cluster.id'"
                )
        return stored

    async def register(self, node_id: int, host: str, port: int, lease_ms: int) -> bool:
        """Take ``node_id`` as this incarnation with a fresh lease; False while a lease on it is live."""
        with storage_errors("register node"):
            row = await self._pool.fetchval(_REGISTER, node_id, host, port, lease_ms, self.incarnation)
        return row is not None

    async def renew(self, node_id: int, lease_ms: int) -> bool:
        """Extend this incarnation's lease; False when it had lapsed already or another incarnation
        holds the id (:meth:`holder` tells which)."""
        with storage_errors("renew lease"):
            row = await self._pool.fetchval(_RENEW, node_id, lease_ms, self.incarnation)
        return row is not None

    async def holder(self, node_id: int) -> Registration | None:
        """Who holds ``node_id`` now (None: nobody has registered it, or its holder left)."""
        with storage_errors("read registration"):
            row = await self._pool.fetchrow(
                "SELECT incarnation, (extract(epoch FROM lease_expires_at) * 1000)::bigint AS expires_ms,"
                f" {_LIVE} AS live FROM cluster_nodes WHERE node_id = $1",
                node_id,
            )
        return None if row is None else Registration(row["incarnation"], row["expires_ms"], row["live"])

    async def deregister(self, node_id: int) -> bool:
        """A clean exit: drop this incarnation's row and release every partition the node id owns, in
        one transaction; nothing (False) when another incarnation holds the id now."""
        with storage_errors("deregister node"):
            async with self._pool.acquire() as connection, connection.transaction():
                mine = await connection.fetchval(
                    "DELETE FROM cluster_nodes WHERE node_id = $1 AND incarnation = $2 RETURNING node_id",
                    node_id,
                    self.incarnation,
                )
                if mine is None:
                    return False
                await connection.execute(
                    "UPDATE log_partitions SET owner_node = NULL WHERE owner_node = $1", node_id
                )
        return True

    async def live_nodes(self) -> list[LiveNode]:
        """Every node whose lease has not lapsed, by id."""
        with storage_errors("list nodes"):
            rows = await self._pool.fetch(
                f"SELECT node_id, host, port FROM cluster_nodes WHERE {_LIVE} ORDER BY node_id"
            )
        return [LiveNode(row["node_id"], row["host"], row["port"]) for row in rows]

    async def owners(self) -> list[PartitionOwner]:
        """Every partition with its recorded owner (None: unowned) and epoch."""
        with storage_errors("list owners"):
            rows = await self._pool.fetch(
                "SELECT topic, partition_id, owner_node, owner_epoch FROM log_partitions"
                " ORDER BY topic, partition_id"
            )
        return [
            PartitionOwner(row["topic"], row["partition_id"], row["owner_node"], row["owner_epoch"])
            for row in rows
        ]

    async def claim(self, node_id: int, topic: str, partition: int) -> int | None:
        """Become the owner of ``topic``-``partition``; the new epoch, or None when it is not free."""
        with storage_errors("claim partition"):
            epoch: int | None = await self._pool.fetchval(_CLAIM, node_id, topic, partition, self.incarnation)
        return epoch

    async def record_epoch_start(self, topic: str, partition: int, epoch: int, start_offset: int) -> None:
        """Note where ``epoch`` starts: the log end offset once the claim had committed, so every
        append of the previous owner is below it (its later rounds are fenced)."""
        with storage_errors("record leader epoch"):
            await self._pool.execute(
                "INSERT INTO leader_epochs (topic, partition_id, epoch, start_offset) VALUES ($1, $2, $3, $4)"
                " ON CONFLICT DO NOTHING",
                topic,
                partition,
                epoch,
                start_offset,
            )

    async def epochs_around(
        self, topic: str, partition: int, epoch: int, latest: int
    ) -> tuple[EpochStart | None, EpochStart | None]:
        """The recorded epoch at or below ``epoch`` nearest to it, and the first above it (up to
        ``latest``, the asking leader's own): what OffsetForLeaderEpoch's end offset comes from."""
        with storage_errors("read leader epochs"):
            rows = await self._pool.fetch(
                "(SELECT epoch, start_offset, 0 AS side FROM leader_epochs"
                "  WHERE topic = $1 AND partition_id = $2 AND epoch <= $3 ORDER BY epoch DESC LIMIT 1)"
                " UNION ALL "
                "(SELECT epoch, start_offset, 1 AS side FROM leader_epochs"
                "  WHERE topic = $1 AND partition_id = $2 AND epoch > $3 AND epoch <= $4"
                "  ORDER BY epoch LIMIT 1)",
                topic,
                partition,
                epoch,
                latest,
            )
        found = {row["side"]: EpochStart(row["epoch"], row["start_offset"]) for row in rows}
        return found.get(0), found.get(1)

    async def moves(self, topic: str, partition: int, limit: int = 32) -> list[OwnershipMove]:
        """The last ``limit`` claims of the partition, oldest first."""
        with storage_errors("list moves"):
            rows = await self._pool.fetch(
                "SELECT epoch, node_id, previous_node,"
                " (extract(epoch FROM moved_at) * 1000)::bigint AS moved_at_ms FROM ownership_moves"
                " WHERE topic = $1 AND partition_id = $2 ORDER BY epoch DESC LIMIT $3",
                topic,
                partition,
                limit,
            )
        return [
            OwnershipMove(row["epoch"], row["node_id"], row["previous_node"], row["moved_at_ms"])
            for row in reversed(rows)
        ]

    async def release(self, node_id: int, topic: str, partition: int) -> None:
        """Give the partition up (if still ours: this incarnation still holds the owning id) so its
        next owner can claim it at once."""
        with storage_errors("release partition"):
            await self._pool.execute(
                "UPDATE log_partitions SET owner_node = NULL"
                f" WHERE topic = $2 AND partition_id = $3 AND owner_node = $1 AND {_MINE}",
                node_id,
                topic,
                partition,
                self.incarnation,
            )
