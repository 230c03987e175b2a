"""The topic catalogue every node of a cluster shares: ``topic_catalogue`` in PostgreSQL.

One row per topic (name, random id, partition count, config overrides, internal flag, the
catalogue version of its last change) and one counter row, ``topic_catalogue_version``, that every
change bumps inside its own transaction. Taking that row's lock first serialises every catalogue
change of every node, so two nodes creating one name race cleanly: the second waits, then finds
the row and loses. The partition rows of ``log_partitions`` (and their first segment) are written
in the same transaction as the catalogue row, so a topic never exists without its logs or the
reverse; a delete removes both (the logs' batches go with them by ``ON DELETE CASCADE``).

A recreated topic's partitions start at the highest owner epoch the old topic's partitions ever
had (``ownership_moves`` outlives them), so the first claim of the new partition gets an epoch no
stale log of the old one holds, and fencing keeps a slow former owner out of the new log.

Other nodes learn of changes by polling :meth:`TopicCatalogue.version` (one indexed row) and
reading the whole catalogue (:meth:`TopicCatalogue.snapshot`) when it moved.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any

import asyncpg

from kcoord.storage.api import TopicInfo
from kcoord.storage.postgres.errors import storage_errors
from kcoord.storage.postgres.schema import Connection

__all__ = ["CatalogueRow", "CatalogueSnapshot", "DeleteOutcome", "GrowOutcome", "TopicCatalogue"]


CatalogueRow = TopicInfo
"""A row of ``topic_catalogue``: the topic as every catalogue holds it."""


@dataclass(frozen=True, slots=True)
class CatalogueSnapshot:
    """The whole catalogue as of one catalogue version."""

    version: int
    topics: list[CatalogueRow]


class DeleteOutcome(Enum):
    DELETED = "deleted"
    UNKNOWN = "unknown"
    INTERNAL = "internal"


class GrowOutcome(Enum):
    GROWN = "grown"
    UNKNOWN = "unknown"
    NOT_GROWING = "not_growing"
    """The topic already has at least the requested count (another node grew it meanwhile)."""


_BUMP = "UPDATE topic_catalogue_version SET version = version + 1 RETURNING version"

_ANY_UNCATALOGUED = """
SELECT EXISTS (SELECT 1 FROM log_partitions p
               WHERE NOT EXISTS (SELECT 1 FROM topic_catalogue c WHERE c.name = p.topic))
"""

_UNCATALOGUED = """
SELECT topic, max(partition_id) + 1 AS partitions
FROM log_partitions p
WHERE NOT EXISTS (SELECT 1 FROM topic_catalogue c WHERE c.name = p.topic)
GROUP BY topic
ORDER BY topic
"""

_INSERT_ROW = """
INSERT INTO topic_catalogue (name, topic_id, partitions, configs, internal, version)
VALUES ($1, $2, $3, $4::jsonb, $5, $6)
"""

_TAKEN = "SELECT name FROM topic_catalogue WHERE name = ANY($1::text[])"

_INSERT_ROWS = """
INSERT INTO topic_catalogue (name, topic_id, partitions, configs, internal, version)
SELECT t.name, t.topic_id, t.partitions, t.configs::jsonb, t.internal, $6
FROM unnest($1::text[], $2::uuid[], $3::integer[], $4::text[], $5::boolean[])
     AS t(name, topic_id, partitions, configs, internal)
"""

_CURRENT_PARTITIONS = "SELECT name, partitions FROM topic_catalogue WHERE name = ANY($1::text[])"

_GROW_ROWS = """
UPDATE topic_catalogue c SET partitions = t.total, version = $3
FROM unnest($1::text[], $2::integer[]) AS t(name, total)
WHERE c.name = t.name
"""

_ADD_PARTITIONS = """
INSERT INTO log_partitions (topic, partition_id, owner_epoch)
SELECT t.topic, p, coalesce((SELECT max(m.epoch) FROM ownership_moves m
                             WHERE m.topic = t.topic AND m.partition_id = p), 0)
FROM unnest($1::text[], $2::integer[], $3::integer[]) AS t(topic, first, stop),
     generate_series(t.first, t.stop - 1) AS p
"""

_ADD_FIRST_SEGMENTS = """
INSERT INTO log_segments (topic, partition_id, base_offset, created_ms)
SELECT t.topic, p, 0, $4
FROM unnest($1::text[], $2::integer[], $3::integer[]) AS t(topic, first, stop),
     generate_series(t.first, t.stop - 1) AS p
"""


def _row(record: asyncpg.Record) -> CatalogueRow:
    return CatalogueRow(
        name=record["name"],
        topic_id=record["topic_id"],
        partitions=record["partitions"],
        configs={str(k): str(v) for k, v in json.loads(record["configs"]).items()},
        internal=record["internal"],
    )


class TopicCatalogue:
    """The catalogue tables of one database, reached through a store's pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @asynccontextmanager
    async def _change(self, step: str) -> AsyncIterator[tuple[Connection, int]]:
        """A catalogue change: a transaction that first takes the version row's lock by bumping it,
        and the version it bumped to. Raise :class:`_NothingChangedError` inside to roll it back."""
        with storage_errors(step):
            async with self._pool.acquire() as connection, connection.transaction():
                yield connection, await connection.fetchval(_BUMP)

    async def version(self) -> int:
        """The catalogue version: it grows with every committed change."""
        with storage_errors("read catalogue version"):
            version: int = await self._pool.fetchval("SELECT version FROM topic_catalogue_version")
        return version

    async def snapshot(self) -> CatalogueSnapshot:
        """Every topic and the version they are the state of, read in one snapshot."""
        with storage_errors("read catalogue"):
            async with (
                self._pool.acquire() as connection,
                connection.transaction(isolation="repeatable_read", readonly=True),
            ):
                version: int = await connection.fetchval("SELECT version FROM topic_catalogue_version")
                records = await connection.fetch(
                    "SELECT name, topic_id, partitions, configs::text AS configs, internal"
                    " FROM topic_catalogue ORDER BY name"
                )
        return CatalogueSnapshot(version, [_row(record) for record in records])

    async def create(self, row: CatalogueRow, now_ms: int) -> bool:
        """Add the topic with its partitions' rows; False (nothing changed) when the name is taken."""
        return (await self.create_many([row], now_ms))[row.name]

    async def create_many(self, rows: Sequence[CatalogueRow], now_ms: int) -> dict[str, bool]:
        """Add every topic whose name is free, with its partitions' rows, in one transaction (one
        catalogue version); per name whether it was added (False: taken, or named twice in ``rows``,
        where the first is added). Nothing is committed when none is added."""
        added: dict[str, bool] = {}
        try:
            async with self._change("create topics") as (connection, version):
                taken = {
                    record["name"] for record in await connection.fetch(_TAKEN, [row.name for row in rows])
                }
                fresh: list[CatalogueRow] = []
                for row in rows:
                    if row.name not in added:
                        added[row.name] = row.name not in taken
                        if added[row.name]:
                            fresh.append(row)
                if not fresh:
                    raise _NothingChangedError(None)
                await connection.execute(
                    _INSERT_ROWS,
                    [row.name for row in fresh],
                    [row.topic_id for row in fresh],
                    [row.partitions for row in fresh],
                    [json.dumps(dict(row.configs), sort_keys=True) for row in fresh],
                    [row.internal for row in fresh],
                    version,
                )
                names = [row.name for row in fresh]
                firsts = [0] * len(fresh)
                ends = [row.partitions for row in fresh]
                await connection.execute(_ADD_PARTITIONS, names, firsts, ends)
                await connection.execute(_ADD_FIRST_SEGMENTS, names, firsts, ends, now_ms)
        except _NothingChangedError:
            pass
        return added

    async def adopt_uncatalogued(self, row_for: Callable[[str, int], CatalogueRow]) -> dict[str, int]:
        """Catalogue every topic whose logs exist without a catalogue row, as ``row_for(topic,
        partition count)`` says (the adoption rule lives above storage), and return them with
        their partition counts. Such logs were written by a node that served this database alone
        (not in cluster mode, which keeps its catalogue in ``topics.json``); a cluster that starts on
        that database takes them over rather than tripping on them when it creates a topic."""
        with storage_errors("adopt uncatalogued topics"):
            if not await self._pool.fetchval(_ANY_UNCATALOGUED):
                return {}
        try:
            async with self._change("adopt uncatalogued topics") as (connection, version):
                adopted: dict[str, int] = {}
                for found in await connection.fetch(_UNCATALOGUED):
                    row = row_for(found["topic"], found["partitions"])
                    await _insert_row(connection, row, version)
                    adopted[row.name] = row.partitions
                if not adopted:
                    raise _NothingChangedError(None)
        except _NothingChangedError:
            return {}
        return adopted

    async def delete(self, name: str) -> tuple[DeleteOutcome, CatalogueRow | None]:
        """Remove a non-internal topic and its logs; the row as it was (None when unknown)."""
        try:
            async with self._change("delete topic") as (connection, _):
                record = await connection.fetchrow(
                    "SELECT name, topic_id, partitions, configs::text AS configs, internal"
                    " FROM topic_catalogue WHERE name = $1",
                    name,
                )
                if record is None or record["internal"]:
                    raise _NothingChangedError(record)
                await connection.execute("DELETE FROM topic_catalogue WHERE name = $1", name)
                await connection.execute("DELETE FROM log_partitions WHERE topic = $1", name)
        except _NothingChangedError as undo:
            if undo.value is None:
                return DeleteOutcome.UNKNOWN, None
            return DeleteOutcome.INTERNAL, _row(undo.value)
        return DeleteOutcome.DELETED, _row(record)

    async def add_partitions(self, name: str, new_total: int, now_ms: int) -> tuple[GrowOutcome, int]:
        """Grow the topic to ``new_total`` partitions; the outcome and the count it has now (0 when
        unknown)."""
        return (await self.add_partitions_many({name: new_total}, now_ms))[name]

    async def add_partitions_many(
        self, totals: Mapping[str, int], now_ms: int
    ) -> dict[str, tuple[GrowOutcome, int]]:
        """Grow each topic to its total (topic -> new partition count) in one transaction; per topic
        the outcome and the count it has now (0 when unknown). Nothing is committed when none grows."""
        outcomes: dict[str, tuple[GrowOutcome, int]] = {}
        try:
            async with self._change("add partitions") as (connection, version):
                records = await connection.fetch(_CURRENT_PARTITIONS, list(totals))
                current = {record["name"]: record["partitions"] for record in records}
                growing: dict[str, tuple[int, int]] = {}
                for name, total in totals.items():
                    count = current.get(name)
                    if count is None:
                        outcomes[name] = (GrowOutcome.UNKNOWN, 0)
                    elif count >= total:
                        outcomes[name] = (GrowOutcome.NOT_GROWING, count)
                    else:
                        outcomes[name] = (GrowOutcome.GROWN, total)
                        growing[name] = (count, total)
                if not growing:
                    raise _NothingChangedError(None)
                names = list(growing)
                firsts = [growing[name][0] for name in names]
                ends = [growing[name][1] for name in names]
                await connection.execute(_GROW_ROWS, names, ends, version)
                await connection.execute(_ADD_PARTITIONS, names, firsts, ends)
                await connection.execute(_ADD_FIRST_SEGMENTS, names, firsts, ends, now_ms)
        except _NothingChangedError:
            pass
        return outcomes

    async def alter_configs(
        self, name: str, change: Callable[[dict[str, str], bool], Mapping[str, str]]
    ) -> Mapping[str, str] | None:
        """Replace the topic's overrides with ``change(current overrides, internal)``, computed under
        the catalogue lock so no other node's change in between is lost; the new overrides, or None
        when there is no such topic. An exception from ``change`` rolls everything back."""
        try:
            async with self._change("alter topic configs") as (connection, version):
                record = await connection.fetchrow(
                    "SELECT configs::text AS configs, internal FROM topic_catalogue WHERE name = $1", name
                )
                if record is None:
                    raise _NothingChangedError(None)
                current = {str(k): str(v) for k, v in json.loads(record["configs"]).items()}
                altered = dict(change(current, record["internal"]))
                await connection.execute(
                    "UPDATE topic_catalogue SET configs = $2::jsonb, version = $3 WHERE name = $1",
                    name,
                    json.dumps(altered, sort_keys=True),
                    version,
                )
        except _NothingChangedError:
            return None
        return altered


async def _insert_row(connection: Connection, row: CatalogueRow, version: int) -> None:
    configs = json.dumps(dict(row.configs), sort_keys=True)
    await connection.execute(
        _INSERT_ROW, row.name, row.topic_id, row.partitions, configs, row.internal, version
    )


class _NothingChangedError(Exception):
    """Raised inside a catalogue transaction that changes nothing, to roll back its version bump;
    carries what the caller needs to say why."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value
