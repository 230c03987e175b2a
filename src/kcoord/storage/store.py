"""Choosing a log engine by URL: ``file:///path/to/data``, ``memory://`` or ``postgresql://...``."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from kcoord.storage.api import LogConfig, LogStore
from kcoord.storage.file_store import FileLogStore
from kcoord.storage.memory import MemoryLogStore
from kcoord.storage.store_base import (
    DEFAULT_LOG_CLEANER_BACKOFF_MS,
    DEFAULT_RETENTION_CHECK_INTERVAL_MS,
    BackgroundPasses,
)
from kcoord.timer.api import Clock

__all__ = ["open_store"]


def open_store(
    url: str,
    default_config: LogConfig | None = None,
    *,
    clock: Clock | None = None,
    retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
    log_cleaner_backoff_ms: int = DEFAULT_LOG_CLEANER_BACKOFF_MS,
    postgres_cache_bytes: int | None = None,
    owned_only: bool = False,
) -> LogStore:
    """The store ``url`` names, not yet opened: ``await store.open()`` loads and recovers it.

    ``log_cleaner_backoff_ms`` is how often the cleaner looks for logs to compact (0: never).
    For ``postgresql://``: ``postgres_cache_bytes`` bounds the batch cache (None: the engine's
    default), and ``owned_only`` (one node of a cluster) opens a partition only when it is claimed and
    holds the database shared with the other nodes (alone, a node holds it exclusively).
    """
    parts = urlsplit(url)
    passes = BackgroundPasses(
        retention_check_interval_ms=retention_check_interval_ms, log_cleaner_backoff_ms=log_cleaner_backoff_ms
    )
    if parts.scheme == "memory":
        return MemoryLogStore(default_config, clock, **passes)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"file URL must name a local path: {url!r}")
        path = unquote(parts.path)
        if not path:
            raise ValueError(f"file URL has no path: {url!r}")
        return FileLogStore(Path(path), default_config, clock, **passes)
    if parts.scheme in ("postgresql", "postgres"):
        from kcoord.storage.postgres import PostgresLogStore
        from kcoord.storage.postgres.hold import HoldMode
        from kcoord.storage.postgres.store import DEFAULT_CACHE_BYTES

        return PostgresLogStore(
            url,
            default_config,
            clock,
            cache_bytes=DEFAULT_CACHE_BYTES if postgres_cache_bytes is None else postgres_cache_bytes,
            owned_only=owned_only,
            hold=HoldMode.SHARED if owned_only else HoldMode.EXCLUSIVE,
            **passes,
        )
    # Only the scheme is named: the rest of the URL may carry a password.
    raise ValueError(f"no log engine for {parts.scheme}:// (use file:///path, memory:// or postgresql://...)")
