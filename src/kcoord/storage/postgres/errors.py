"""Database failures as the log contract reports them: KAFKA_STORAGE_ERROR, which clients retry."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg

from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = ["DATABASE_ERRORS", "storage_errors"]

DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)
"""What an unreachable, restarting or refusing database raises through asyncpg. A call cut off by a
timeout while the database was going away can leave its pooled connection mid-operation, which the
next call on it reports as an internal client error: that too is the outage."""


@contextmanager
def storage_errors(action: str) -> Iterator[None]:
    """Turn a database failure during ``action`` into KAFKA_STORAGE_ERROR (retriable for clients)."""
    try:
        yield
    except DATABASE_ERRORS as exc:
        raise KafkaError(ErrorCode.kafka_storage_error, f"postgres {action} failed: {exc!r}") from exc
