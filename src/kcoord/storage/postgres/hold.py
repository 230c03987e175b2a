"""A node's hold on its PostgreSQL database: one session-level advisory lock, kept by a dedicated session.

A node alone takes the lock exclusively; a node of a cluster (``kcoord.cluster.enable``) takes it shared.
So any number of cluster nodes share a database, a second single node is refused, a cluster node is
refused a database a single node holds and a single node one a cluster holds. The lock is taken before
anything is written (the schema migrations included) and is held for the life of the store; PostgreSQL
drops it the moment the session ends, so a crashed node never leaves it behind.

Losing the session (the database restarted, the connection was cut or stopped answering the probe sent
every :data:`PROBE_INTERVAL_S`) fences the store at once: every connection its pool hands out from then
on fails with KAFKA_STORAGE_ERROR (retriable), so no new write starts. The hold then reconnects and
takes the lock again; a write already in flight when the session went is the only one that can land
after it. Before lifting the fence it checks that no other holder came in between: each single node
writes a fresh token into ``cluster_meta`` (``store.holder``) right after taking the lock, and the first
cluster node after a single one writes a fresh ``cluster:`` token. If the token is not the one this
node saw when it took the lock, or another process holds the lock now, the node's view of the data may
be stale: the hold gives up and tells its owner (``on_lost``), which stops the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import structlog

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.holding import StoreHeldError
from kcoord.storage.postgres.errors import DATABASE_ERRORS

__all__ = ["HOLD_KEY", "DatabaseHold", "HoldMode"]

logger = structlog.get_logger(__name__)

HOLD_KEY = 0x6B636F6F7265
"""The advisory lock a node holds its database by (the migrations' key plus one)."""
PROBE_INTERVAL_S = 1.0
"""How often the holding session is asked whether it is still there."""
PROBE_TIMEOUT_S = 5.0
"""How long a probe may take before the session counts as lost."""
REGAIN_BACKOFF_S = (0.25, 5.0)
"""First and longest wait between attempts to take the lock again."""
_TOKEN_KEY = "store.holder"


class HoldMode(enum.Enum):
    EXCLUSIVE = "a single node"
    SHARED = "a cluster"


_HOLDER_MODES = """
SELECT l.mode, host(a.client_addr) AS client
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database
                                                              WHERE datname = current_database())
  AND l.classid = ($1::bigint >> 32)::oid AND l.objid = ($1::bigint & 4294967295)::oid AND l.objsubid = 1
  AND l.pid <> pg_backend_pid()
"""

_CLAIM_FOR_CLUSTER = f"""
INSERT INTO cluster_meta (key, value) VALUES ('{_TOKEN_KEY}', $1)
ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE cluster_meta.value NOT LIKE 'cluster:%'
"""


class DatabaseHold:
    """The lock one store holds its database by, and the fence it puts up while it is not sure of it."""

    def __init__(self, dsn: str, mode: HoldMode, *, connect_timeout_s: float) -> None:
        self._dsn = dsn
        self.mode = mode
        self._connect_timeout_s = connect_timeout_s
        self._application = f"kcoord {'cluster node' if mode is HoldMode.SHARED else 'single node'}"
        self._session: asyncpg.Connection | None = None
        self._token: str | None = None
        self._watch: asyncio.Task[None] | None = None
        self.fenced = False
        """True while the session is lost and not yet taken again: the pool refuses connections."""
        self.on_lost: Callable[[str], None] | None = None
        """Called (once) when the hold cannot be trusted again; the message says why."""
        self.lost: str | None = None

    @property
    def where(self) -> str:
        """The database as it may be shown: host, port and name, never the user or a password."""
        parts = urlsplit(self._dsn)
        return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"

    # -- taking it

    async def acquire(self) -> None:
        """Take the lock on a session of its own, or raise :class:`StoreHeldError` naming who holds it."""
        session = await self._connect()
        try:
            if not await self._try_lock(session):
                raise StoreHeldError(await self._refusal(session))
        except BaseException:
            await _close(session)
            raise
        self._session = session
        session.add_termination_listener(self._on_terminated)

    async def remember(self, connection: Any) -> None:
        """Write (or read) the holder token, once the schema is in place; starts watching the session."""
        self._token = await self._exchange_token(connection)
        if self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(self._watch_session())

    async def _connect(self) -> asyncpg.Connection:
        return await asyncpg.connect(
            self._dsn,
            timeout=self._connect_timeout_s,
            command_timeout=PROBE_TIMEOUT_S,
            server_settings={"application_name": self._application},
        )

    async def _try_lock(self, session: asyncpg.Connection) -> bool:
        function = "pg_try_advisory_lock_shared" if self.mode is HoldMode.SHARED else "pg_try_advisory_lock"
        return bool(await session.fetchval(f"SELECT {function}($1)", HOLD_KEY))

    async def _refusal(self, session: asyncpg.Connection) -> str:
        rows = await session.fetch(_HOLDER_MODES, HOLD_KEY)
        exclusive = [row for row in rows if row["mode"] == "ExclusiveLock"]
        holder = "a single kcoord node" if exclusive else "a kcoord cluster"
        seen = sorted({row["client"] for row in exclusive or rows if row["client"]})
        shown = f" (connected from {', '.join(seen)})" if seen else ""
        wanted = "join it as a node of a cluster" if self.mode is HoldMode.SHARED else "use it alone"
        return f"database {self.where} is held by {holder}{shown}: this node cannot {wanted}"

    async def _exchange_token(self, connection: Any) -> str:
        if self.mode is HoldMode.EXCLUSIVE:
            token = f"single:{uuid.uuid4()}"
            await connection.execute(
                "INSERT INTO cluster_meta (key, value) VALUES ($1, $2)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                _TOKEN_KEY,
                token,
            )
            return token
        await connection.execute(_CLAIM_FOR_CLUSTER, f"cluster:{uuid.uuid4()}")
        value: str = await connection.fetchval("SELECT value FROM cluster_meta WHERE key = $1", _TOKEN_KEY)
        return value

    # -- keeping it

    async def check(self, connection: Any) -> None:
        """The pool's ``setup``: no connection is handed out while the store is fenced."""
        if self.fenced:
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"the lock on database {self.where} was lost and is not yet taken again",
            )

    def _on_terminated(self, connection: Any) -> None:
        if connection is self._session and not self.fenced:
            self._fence("the session holding the database's lock ended")

    def _fence(self, reason: str) -> None:
        self.fenced = True
        logger.warning("postgres.hold_lost", database=self.where, reason=reason)

    async def _watch_session(self) -> None:
        while True:
            await asyncio.sleep(PROBE_INTERVAL_S)
            session = self._session
            if not self.fenced and session is not None:
                try:
                    await asyncio.wait_for(session.fetchval("SELECT 1"), PROBE_TIMEOUT_S)
                    continue
                except DATABASE_ERRORS as exc:
                    self._fence(f"the probe failed: {type(exc).__name__}")
            if self.fenced and not await self._regain():
                return

    async def _regain(self) -> bool:
        """Take the lock again (retrying while the database is down); False once the hold is given up."""
        if self._session is not None:
            old, self._session = self._session, None
            old.remove_termination_listener(self._on_terminated)
            await _close(old)
        delay, longest = REGAIN_BACKOFF_S
        while True:
            try:
                session = await self._connect()
            except DATABASE_ERRORS as exc:
                self._retrying(delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, longest)
                continue
            try:
                if not await self._try_lock(session):
                    return await self._give_up(session, await self._refusal(session))
                token = await session.fetchval("SELECT value FROM cluster_meta WHERE key = $1", _TOKEN_KEY)
            except DATABASE_ERRORS as exc:
                await _close(session)
                self._retrying(delay, exc)
                await asyncio.sleep(delay)
                continue
            if token != self._token:
                return await self._give_up(
                    session,
                    f"database {self.where} was held by another process while this node's lock was lost",
                )
            self._session = session
            session.add_termination_listener(self._on_terminated)
            self.fenced = False
            logger.info("postgres.hold_regained", database=self.where)
            return True

    def _retrying(self, delay: float, exc: BaseException) -> None:
        logger.warning("postgres.hold_retrying", database=self.where, retry_in_s=delay, error=repr(exc))

    async def _give_up(self, session: asyncpg.Connection, message: str) -> bool:
        await _close(session)
        self.lost = message
        logger.error("postgres.hold_given_up", database=self.where, reason=message)
        if self.on_lost is not None:
            self.on_lost(message)
        return False

    async def release(self) -> None:
        """Stop watching and end the session (which drops the lock)."""
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, *DATABASE_ERRORS):
                await self._watch
            self._watch = None
        session, self._session = self._session, None
        if session is not None:
            session.remove_termination_listener(self._on_terminated)
            await _close(session)


async def _close(session: asyncpg.Connection) -> None:
    try:
        await asyncio.wait_for(session.close(), PROBE_TIMEOUT_S)
    except DATABASE_ERRORS:
        session.terminate()
