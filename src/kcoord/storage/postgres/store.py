"""``postgresql://user:password@host:port/database``: the logs of a node kept in PostgreSQL.

Opening connects a small pool, applies the schema migrations (:mod:`.schema`) and loads every
partition's segments and batches into memory (reads are synchronous in the log contract). The
pool reconnects by itself: while the database is down, appends fail with KAFKA_STORAGE_ERROR
(retriable for clients) and each log recovers on its next append once the database answers.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import asyncpg
import structlog

from kcoord.protocol.errors import KafkaError
from kcoord.storage.api import LogConfig, PartitionLog
from kcoord.storage.memory import MemorySegmentData
from kcoord.storage.postgres.committer import PostgresCommitter
from kcoord.storage.postgres.errors import storage_errors
from kcoord.storage.postgres.log import PostgresLog
from kcoord.storage.postgres.schema import Connection, migrate
from kcoord.storage.segment import Segment, scan_segment
from kcoord.storage.store_base import StoreBase
from kcoord.timer.api import Clock

__all__ = ["PostgresLogStore"]

logger = structlog.get_logger(__name__)

CONNECT_TIMEOUT_S = 5.0
"""How long a connection attempt may take before the append that needed it fails (retriably)."""
COMMAND_TIMEOUT_S = 15.0
POOL_SIZE = 4
START_WAIT_S = 30.0
"""How long opening the store waits for the database to accept connections."""


class PostgresLogStore(StoreBase[PostgresLog]):
    """The logs of one node, durable in the PostgreSQL database ``dsn`` names."""

    def __init__(
        self,
        dsn: str,
        default_config: LogConfig | None = None,
        clock: Clock | None = None,
        *,
        retention_check_interval_ms: int = 300000,
        log_cleaner_backoff_ms: int = 15000,
    ) -> None:
        super().__init__(
            default_config,
            clock,
            retention_check_interval_ms=retention_check_interval_ms,
            log_cleaner_backoff_ms=log_cleaner_backoff_ms,
        )
        self._dsn = dsn
        self._pool: asyncpg.Pool | None = None
        self._committer: PostgresCommitter | None = None

    @property
    def committer(self) -> PostgresCommitter:
        if self._committer is None:
            raise RuntimeError("postgres store is not open")
        return self._committer

    async def open(self) -> None:
        pool = self._pool = await self._connect()
        self._committer = PostgresCommitter(pool)
        with storage_errors("load"):
            async with pool.acquire() as connection:
                version = await migrate(connection)
                await self._load(connection)
        logger.info(
            "log_store.opened", engine="postgresql", schema_version=version, partitions=len(self._logs)
        )
        self._start_background()

    async def _connect(self) -> asyncpg.Pool:
        """The pool, retrying for up to ``START_WAIT_S`` while the database is not up yet (a node and
        its database often start together)."""
        deadline = time.monotonic() + START_WAIT_S
        delay = 0.25
        while True:
            try:
                with storage_errors("connect"):
                    return await asyncpg.create_pool(
                        self._dsn,
                        min_size=1,
                        max_size=POOL_SIZE,
                        timeout=CONNECT_TIMEOUT_S,
                        command_timeout=COMMAND_TIMEOUT_S,
                    )
            except KafkaError as exc:
                if time.monotonic() + delay > deadline:
                    raise
                logger.warning("postgres.unavailable", retry_in_s=delay, error=str(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _load(self, connection: Connection) -> None:
        segments: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        for row in await connection.fetch(
            "SELECT topic, partition_id, base_offset, created_ms FROM log_segments"
            " ORDER BY topic, partition_id, base_offset"
        ):
            segments[(row["topic"], row["partition_id"])].append((row["base_offset"], row["created_ms"]))
        for topic, partition, epoch, log_start in await connection.fetch(
            "SELECT topic, partition_id, owner_epoch, log_start_offset FROM log_partitions"
            " ORDER BY topic, partition_id"
        ):
            rows = await connection.fetch(
                "SELECT base_offset, data FROM log_batches WHERE topic = $1 AND partition_id = $2"
                " ORDER BY base_offset",
                topic,
                partition,
            )
            loaded = self._rebuild(segments.get((topic, partition), []), rows)
            self._adopt(self._new_log(topic, partition, self._default_config, loaded, epoch, log_start))

    async def reopen(self, topic: str, partition: int, owner_epoch: int) -> PostgresLog:
        """The partition as the database holds it now, writing under ``owner_epoch``.

        What a node calls when it takes a partition over: its in-memory copy may be stale (another
        node appended meanwhile), so the old log object is closed and a fresh one replaces it.
        """
        with storage_errors("reopen"):
            async with self._require_pool().acquire() as connection:
                bounds = [
                    (row["base_offset"], row["created_ms"])
                    for row in await connection.fetch(
                        "SELECT base_offset, created_ms FROM log_segments"
                        " WHERE topic = $1 AND partition_id = $2 ORDER BY base_offset",
                        topic,
                        partition,
                    )
                ]
                rows = await connection.fetch(
                    "SELECT base_offset, data FROM log_batches WHERE topic = $1 AND partition_id = $2"
                    " ORDER BY base_offset",
                    topic,
                    partition,
                )
                log_start = await connection.fetchval(
                    "SELECT log_start_offset FROM log_partitions WHERE topic = $1 AND partition_id = $2",
                    topic,
                    partition,
                )
        old = self._logs.pop((topic, partition), None)
        config = old.config if old is not None else self._default_config
        if old is not None:
            await old.close()
        rebuilt = self._rebuild(bounds, rows)
        return self._adopt(self._new_log(topic, partition, config, rebuilt, owner_epoch, log_start))

    async def forget(self, topic: str, partition: int) -> None:
        """Close and drop this node's copy of a partition another node owns, so no retention or
        compaction pass of this node ever works on a stale copy (a later :meth:`reopen` reloads it)."""
        log = self._logs.pop((topic, partition), None)
        if log is not None:
            await log.close()

    def _rebuild(self, bounds: list[tuple[int, int]], rows: list[asyncpg.Record]) -> list[Segment]:
        """In-memory segments from the stored segment starts and batch rows (every row in its segment)."""
        if not bounds:
            bounds = [(0, self._clock.now_ms())]
        buffers = [bytearray() for _ in bounds]
        starts = [base for base, _ in bounds]
        index = 0
        for row in rows:
            while index + 1 < len(starts) and row["base_offset"] >= starts[index + 1]:
                index += 1
            buffers[index] += row["data"]
        interval = self._default_config.index_interval_bytes
        return [
            scan_segment(
                base,
                MemorySegmentData(bytes(buffer)),
                len(buffer),
                index_interval_bytes=interval,
                created_ms=created,
                verify_crc=False,
            )
            for (base, created), buffer in zip(bounds, buffers, strict=True)
        ]

    def _new_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[Segment],
        owner_epoch: int = 0,
        log_start_offset: int | None = None,
    ) -> PostgresLog:
        return PostgresLog(
            topic,
            partition,
            config,
            self._clock,
            segments,
            self._require_pool(),
            self.committer,
            owner_epoch,
            log_start_offset,
        )

    @property
    def pool(self) -> asyncpg.Pool:
        """The open pool (the cluster membership shares it)."""
        return self._require_pool()

    def _require_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("postgres store is not open")
        return self._pool

    async def create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        existing = self._logs.get((topic, partition))
        if existing is not None:
            if config is not None:
                existing.update_config(config)
            return existing
        now = self._clock.now_ms()
        with storage_errors("create"):
            async with self._require_pool().acquire() as connection, connection.transaction():
                await connection.execute(
                    "INSERT INTO log_partitions (topic, partition_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    topic,
                    partition,
                )
                await connection.execute(
                    "INSERT INTO log_segments (topic, partition_id, base_offset, created_ms)"
                    " VALUES ($1, $2, 0, $3) ON CONFLICT DO NOTHING",
                    topic,
                    partition,
                    now,
                )
                epoch = await connection.fetchval(
                    "SELECT owner_epoch FROM log_partitions WHERE topic = $1 AND partition_id = $2",
                    topic,
                    partition,
                )
        log_config = config or self._default_config
        first = Segment(0, MemorySegmentData(), log_config.index_interval_bytes, now)
        return self._adopt(self._new_log(topic, partition, log_config, [first], epoch))

    async def delete_topic(self, topic: str) -> None:
        for key in [key for key in self._logs if key[0] == topic]:
            await self._logs.pop(key).close()
        with storage_errors("delete topic"):
            await self._require_pool().execute("DELETE FROM log_partitions WHERE topic = $1", topic)

    async def close(self) -> None:
        await self._stop_and_close_logs()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
