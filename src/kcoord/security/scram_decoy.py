"""The key of the server's :class:`~kcoord.security.scram.ScramDecoy`: what SCRAM shows for a user
who does not exist must not be told from a real user's, and its salt must stay the same for a
name across restarts, and across the nodes of a cluster, as a real user's does.

On a single node the key lives in ``scram-decoy.key`` in the data directory (mode 0600). In a
cluster it is one of the documents every node shares in PostgreSQL (``scram_decoy``): were it per
node, asking two nodes for the same unknown name would show two salts where a real user shows one,
and tell the stranger which names exist. The first node that needs it stores it under the row's
lock (its own data directory's key if it had one, so a single node turned cluster keeps its
salts); every other node reads that one. The key is made at the first SCRAM handshake that needs
it, never at start-up, so a failed start writes nothing.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kcoord.security.scram import ScramDecoy
from kcoord.storage.atomic_file import write_atomically
from kcoord.storage.documents import StateDocument

__all__ = ["DECOY_KEY_FILE", "DataDirDecoy", "ScramDecoySource", "load_or_create_key", "shared_key_loader"]

DECOY_KEY_FILE = "scram-decoy.key"
_KEY_BYTES = 32


def read_key(data_dir: Path) -> bytes | None:
    """The data directory's decoy key, or None when it has none (or a torn one). Blocking."""
    try:
        key = (data_dir / DECOY_KEY_FILE).read_bytes()
    except FileNotFoundError:
        return None
    return key if len(key) == _KEY_BYTES else None


def load_or_create_key(data_dir: Path) -> bytes:
    """The data directory's decoy key, made (0600, written whole or not at all) when missing.

    Blocking: call it from a thread on the server.
    """
    key = read_key(data_dir)
    if key is None:
        key = secrets.token_bytes(_KEY_BYTES)
        write_atomically(data_dir / DECOY_KEY_FILE, key, mode=0o600)
    return key


def _document_key(document: Any) -> bytes | None:
    """The key a shared ``{"key": hex}`` document holds, or None when it holds none."""
    if not isinstance(document, dict) or not isinstance(document.get("key"), str):
        return None
    try:
        key = bytes.fromhex(document["key"])
    except ValueError:
        return None
    return key if len(key) == _KEY_BYTES else None


def shared_key_loader(document: StateDocument, data_dir: Path) -> Callable[[], Awaitable[bytes]]:
    """Loads the cluster's one decoy key from ``document``, storing one first when there is none."""

    async def load() -> bytes:
        _, current = await document.read_if_changed()
        key = _document_key(current)
        if key is not None:
            return key
        candidate = await asyncio.to_thread(read_key, data_dir) or secrets.token_bytes(_KEY_BYTES)

        def keep_or_store(existing: Any) -> Any:
            return existing if _document_key(existing) is not None else {"key": candidate.hex()}

        stored = _document_key(await document.update(keep_or_store))
        assert stored is not None, "keep_or_store always leaves a key"
        return stored

    return load


class ScramDecoySource:
    """The server's decoy, its key loaded (or made) once, the first time a handshake needs it."""

    def __init__(self, load_key: Callable[[], Awaitable[bytes]]) -> None:
        self._load_key = load_key
        self._decoy: ScramDecoy | None = None
        self._lock = asyncio.Lock()

    async def ready(self) -> ScramDecoy:
        if self._decoy is None:
            async with self._lock:
                if self._decoy is None:
                    self._decoy = ScramDecoy(await self._load_key())
        return self._decoy


class DataDirDecoy(ScramDecoySource):
    """A single node's decoy: its key read from (or first written to) the data directory."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(lambda: asyncio.to_thread(load_or_create_key, data_dir))
