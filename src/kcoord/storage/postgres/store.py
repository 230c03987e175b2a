"""``postgresql://user@host:port/database``: the logs of a node kept in PostgreSQL.

The password is best kept off the URL (which ``ps`` shows when it is given as ``--storage``): as with
libpq, it is taken from ``PGPASSWORD`` or from the password file ``PGPASSFILE`` names (``~/.pgpass``
by default, mode 0600), which asyncpg reads when the URL has none.

Opening connects a small pool and applies the schema migrations (:mod:`.schema`). A node that
serves every partition (one node alone) then loads every partition's *index* (the batch rows
without their bytes: :mod:`.segment`); a node of a cluster (``owned_only``) loads none, and loads a
partition's index when it claims it (:meth:`PostgresLogStore.reopen`). Batch bytes are kept in one
bounded cache per store (:mod:`.batch_cache`, ``kcoord.storage.postgres.cache.bytes``) and read
from the database when missing. The pool reconnects by itself: while the database is down,
appends and cold reads fail with KAFKA_STORAGE_ERROR (retriable for clients) and each log
recovers on its next append once the database answers.
"""

from __future__ import annotations

import asyncio
import time
from typing import Unpack

import asyncpg
import structlog

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.api import LogConfig, PartitionLog
from kcoord.storage.postgres.batch_cache import BatchCache
from kcoord.storage.postgres.committer import PostgresCommitter
from kcoord.storage.postgres.errors import storage_errors
from kcoord.storage.postgres.hold import DatabaseHold, HoldMode
from kcoord.storage.postgres.log import PostgresLog
from kcoord.storage.postgres.schema import Connection, migrate
from kcoord.storage.postgres.segment import PostgresSegment, segment_from_rows
from kcoord.storage.segment import Segment
from kcoord.storage.store_base import BackgroundPasses, StoreBase
from kcoord.timer.api import Clock

__all__ = ["PostgresLogStore"]

logger = structlog.get_logger(__name__)

CONNECT_TIMEOUT_S = 5.0
"""How long a connection attempt may take before the append that needed it fails (retriably)."""
COMMAND_TIMEOUT_S = 15.0
POOL_SIZE = 4
START_WAIT_S = 30.0
"""How long opening the store waits for the database to accept connections."""
CLOSE_TIMEOUT_S = 5.0
"""How long closing waits for the logs' pending rounds, then for the pool's connections."""
DEFAULT_CACHE_BYTES = 256 << 20
"""``kcoord.storage.postgres.cache.bytes``'s default."""
_REFUSALS = (asyncpg.InvalidAuthorizationSpecificationError, asyncpg.InvalidCatalogNameError)
"""A wrong user or password, or no such database: waiting does not mend these, the start fails at once."""


class PostgresLogStore(StoreBase[PostgresLog]):
    """The logs of one node, durable in the PostgreSQL database ``dsn`` names."""

    def __init__(
        self,
        dsn: str,
        default_config: LogConfig | None = None,
        clock: Clock | None = None,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        owned_only: bool = False,
        hold: HoldMode = HoldMode.EXCLUSIVE,
        **passes: Unpack[BackgroundPasses],
    ) -> None:
        super().__init__(default_config, clock, **passes)
        self._dsn = dsn
        self._pool: asyncpg.Pool | None = None
        self._committer: PostgresCommitter | None = None
        self.cache = BatchCache(cache_bytes)
        """The bytes of recent batches, shared by every log of this store."""
        self._owned_only = owned_only
        """One node of several: hold a partition only once :meth:`reopen` claimed it."""
        self._configs: dict[tuple[str, int], LogConfig] = {}
        """The config each partition was last given (:meth:`create`, :meth:`configure`), for when it
        is (re)opened later: a claim reopens a log with its topic's current config."""
        self.hold = DatabaseHold(dsn, hold, connect_timeout_s=CONNECT_TIMEOUT_S)
        """The node's lock on the database (:mod:`.hold`): exclusive alone, shared in a cluster."""

    @property
    def committer(self) -> PostgresCommitter:
        if self._committer is None:
            raise RuntimeError("postgres store is not open")
        return self._committer

    async def open(self) -> None:
        """Take the database's lock (or raise :class:`~kcoord.storage.holding.StoreHeldError`), then
        migrate the schema and load; a failed open lets go of what it took."""
        pool = self._pool = await self._connect()
        self._committer = PostgresCommitter(pool)
        try:
            with storage_errors("load"):
                async with pool.acquire() as connection:
                    version = await migrate(connection)
                    await self.hold.remember(connection)
                    if not self._owned_only:
                        await self._load(connection)
        except BaseException:
            self._pool = None
            pool.terminate()
            await self.hold.release()
            raise
        logger.info(
            "log_store.opened",
            engine="postgresql",
            schema_version=version,
            partitions=len(self._logs),
            owned_only=self._owned_only,
            cache_bytes=self.cache.capacity,
        )
        self._start_background()

    async def _connect(self) -> asyncpg.Pool:
        """The database's lock, then the pool, retrying for up to ``START_WAIT_S`` while the database is
        not up yet (a node and its database often start together). Every connection the pool hands
        out first passes the hold's fence."""
        deadline = time.monotonic() + START_WAIT_S
        delay = 0.25
        while True:
            try:
                with storage_errors("connect"):
                    await self.hold.acquire()
                    try:
                        return await asyncpg.create_pool(
                            self._dsn,
                            min_size=1,
                            max_size=POOL_SIZE,
                            timeout=CONNECT_TIMEOUT_S,
                            command_timeout=COMMAND_TIMEOUT_S,
                            setup=self.hold.check,
                        )
                    except BaseException:
                        await self.hold.release()
                        raise
            except KafkaError as exc:
                if time.monotonic() + delay > deadline or isinstance(exc.__cause__, _REFUSALS):
                    raise
                logger.warning("postgres.unavailable", retry_in_s=delay, error=str(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _load(self, connection: Connection) -> None:
        """Open every partition the database holds (a node serving them all)."""
        for topic, partition, epoch, log_start in await connection.fetch(
            "SELECT topic, partition_id, owner_epoch, log_start_offset FROM log_partitions"
            " ORDER BY topic, partition_id"
        ):
            segments = await self._read_index(connection, topic, partition)
            self._adopt(
                self._new_log(topic, partition, self._config_of(topic, partition), segments, epoch, log_start)
            )

    async def _read_partition(
        self, connection: Connection, topic: str, partition: int
    ) -> tuple[list[Segment], int, int | None] | None:
        """A partition's segments (batch index only, no bytes), owner epoch and log start; None when
        the database does not hold it."""
        head = await connection.fetchrow(
            "SELECT owner_epoch, log_start_offset FROM log_partitions WHERE topic = $1 AND partition_id = $2",
            topic,
            partition,
        )
        if head is None:
            return None
        return (
            await self._read_index(connection, topic, partition),
            head["owner_epoch"],
            head["log_start_offset"],
        )

    async def _read_index(self, connection: Connection, topic: str, partition: int) -> list[Segment]:
        """A partition's segments as its stored segment starts and batch rows index them (no bytes)."""
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
            "SELECT base_offset, last_offset, max_timestamp, size FROM log_batches"
            " WHERE topic = $1 AND partition_id = $2 ORDER BY base_offset",
            topic,
            partition,
        )
        return self._rebuild(bounds, rows)

    async def reopen(self, topic: str, partition: int, owner_epoch: int) -> PostgresLog:
        """The partition as the database holds it now, writing under ``owner_epoch``.

        What a node calls when it takes a partition over: its in-memory copy may be stale (another
        node appended meanwhile), so the old log object is closed and a fresh one replaces it.
        Only the batch index is read; the bytes come into the cache as they are read.
        """
        with storage_errors("reopen"):
            async with self._require_pool().acquire() as connection:
                loaded = await self._read_partition(connection, topic, partition)
        if loaded is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition} is not stored")
        segments, _, log_start = loaded
        old = self._logs.pop((topic, partition), None)
        config = old.config if old is not None else self._config_of(topic, partition)
        if old is not None:
            await old.close()
        return self._adopt(self._new_log(topic, partition, config, segments, owner_epoch, log_start))

    async def forget(self, topic: str, partition: int) -> None:
        """Close and drop this node's copy of a partition another node owns, so no retention or
        compaction pass of this node ever works on a stale copy (a later :meth:`reopen` reloads it)."""
        log = self._logs.pop((topic, partition), None)
        if log is not None:
            self._configs[(topic, partition)] = log.config
            await log.close()

    def configure(self, topic: str, partition: int, config: LogConfig) -> None:
        self._configs[(topic, partition)] = config
        super().configure(topic, partition, config)

    def _config_of(self, topic: str, partition: int) -> LogConfig:
        return self._configs.get((topic, partition), self._default_config)

    def _rebuild(self, bounds: list[tuple[int, int]], rows: list[asyncpg.Record]) -> list[Segment]:
        """Indexed segments from the stored segment starts and batch rows (every row in its segment)."""
        if not bounds:
            bounds = [(0, self._clock.now_ms())]
        per_segment: list[list[tuple[int, int, int, int]]] = [[] for _ in bounds]
        starts = [base for base, _ in bounds]
        index = 0
        for row in rows:
            while index + 1 < len(starts) and row["base_offset"] >= starts[index + 1]:
                index += 1
            per_segment[index].append(
                (row["base_offset"], row["last_offset"], row["max_timestamp"], row["size"])
            )
        interval = self._default_config.index_interval_bytes
        return [
            segment_from_rows(base, created, batches, index_interval_bytes=interval)
            for (base, created), batches in zip(bounds, per_segment, strict=True)
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
            self.cache,
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
        """The partition's log, created in the database if missing.

        Under ``owned_only`` a partition the database already held is not opened here (another node
        may own it): its config is kept for the claim that opens it, and what is returned is a closed
        handle that no lookup of this store finds (:meth:`get` answers None until the claim).
        """
        key = (topic, partition)
        if config is not None:
            self._configs[key] = config
        existing = self._logs.get(key)
        if existing is not None:
            if config is not None:
                existing.update_config(config)
            return existing
        now = self._clock.now_ms()
        with storage_errors("create"):
            async with self._require_pool().acquire() as connection, connection.transaction():
                created = await connection.fetchval(
                    "INSERT INTO log_partitions (topic, partition_id) VALUES ($1, $2)"
                    " ON CONFLICT DO NOTHING RETURNING true",
                    topic,
                    partition,
                )
                if not created:
                    return await self._open_existing(connection, topic, partition)
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
        first = PostgresSegment(0, log_config.index_interval_bytes, now)
        return self._adopt(self._new_log(topic, partition, log_config, [first], epoch))

    async def _open_existing(self, connection: Connection, topic: str, partition: int) -> PostgresLog:
        """A partition the database holds but this store has not opened (see :meth:`create`)."""
        config = self._config_of(topic, partition)
        if self._owned_only:
            detached = self._new_log(
                topic, partition, config, [PostgresSegment(0, config.index_interval_bytes, 0)]
            )
            await detached.close()
            return detached
        loaded = await self._read_partition(connection, topic, partition)
        if loaded is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition} vanished")
        segments, epoch, log_start = loaded
        return self._adopt(self._new_log(topic, partition, config, segments, epoch, log_start))

    async def delete_topic(self, topic: str) -> None:
        for key in [key for key in self._configs if key[0] == topic]:
            del self._configs[key]
        for key in [key for key in self._logs if key[0] == topic]:
            await self._logs.pop(key).close()
        with storage_errors("delete topic"):
            await self._require_pool().execute("DELETE FROM log_partitions WHERE topic = $1", topic)

    async def close(self) -> None:
        """Close the logs (each waits for its pending round) and the pool, each within
        :data:`CLOSE_TIMEOUT_S`: a round or a query stuck on a slow or unreachable database is
        abandoned (nothing unacknowledged is lost by that) rather than holding the exit."""
        try:
            await asyncio.wait_for(self._stop_and_close_logs(), CLOSE_TIMEOUT_S)
        except TimeoutError:
            logger.warning("log_store.close_timed_out", step="logs", timeout_s=CLOSE_TIMEOUT_S)
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), CLOSE_TIMEOUT_S)
            except TimeoutError:
                logger.warning("log_store.close_timed_out", step="pool", timeout_s=CLOSE_TIMEOUT_S)
                pool.terminate()
        await self.hold.release()
