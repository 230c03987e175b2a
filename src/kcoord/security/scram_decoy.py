"""The key of the server's :class:`~kcoord.security.scram.ScramDecoy`: what SCRAM shows for a user
who does not exist must not be told from a real user's, and its salt must stay the same for a
name across restarts as a real user's does.

The key lives in ``scram-decoy.key`` in the data directory (mode 0600), so the salts stay the same
across restarts as real users' do. It is created at the first SCRAM handshake that needs it, never
at start-up, so a failed start writes nothing.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path

from kcoord.security.scram import ScramDecoy

DECOY_KEY_FILE = "scram-decoy.key"
_KEY_BYTES = 32


def load_or_create_key(data_dir: Path) -> bytes:
    """The data directory's decoy key, made (0600, written whole or not at all) when missing.

    Blocking: call it from a thread on the server.
    """
    path = data_dir / DECOY_KEY_FILE
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = b""
    if len(key) == _KEY_BYTES:
        return key
    key = secrets.token_bytes(_KEY_BYTES)
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return key


class DataDirDecoy:
    """The decoy of a server, its key read from (or first written to) the data directory."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._decoy: ScramDecoy | None = None
        self._lock = asyncio.Lock()

    async def ready(self) -> ScramDecoy:
        """The decoy, its key loaded in a worker thread the first time."""
        if self._decoy is None:
            async with self._lock:
                if self._decoy is None:
                    key = await asyncio.to_thread(load_or_create_key, self._data_dir)
                    self._decoy = ScramDecoy(key)
        return self._decoy
