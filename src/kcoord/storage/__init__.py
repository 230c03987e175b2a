"""Partition logs behind one narrow interface, opened by URL (``file:///path``, ``memory://``)."""

from kcoord.storage.api import (
    AppendListener,
    AppendResult,
    CleanupPolicy,
    CompactionResult,
    LogConfig,
    LogStore,
    PartitionLog,
)
from kcoord.storage.store import open_store

__all__ = [
    "AppendListener",
    "AppendResult",
    "CleanupPolicy",
    "CompactionResult",
    "LogConfig",
    "LogStore",
    "PartitionLog",
    "open_store",
]
