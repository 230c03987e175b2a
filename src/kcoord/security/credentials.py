"""SCRAM credentials of the users who may log in, kept in ``scram-credentials.json`` in the data dir.

Only salted, iterated keys are stored (salt, iterations, StoredKey, ServerKey per mechanism), never
a password. The file is rewritten whole (temporary file, fsync, rename, fsync of the directory),
so a crash leaves the old or the new set. The server does its file I/O in a worker thread and
re-reads the file when it changed on disk, so ``kcoord users add`` on the data directory takes
effect at the next login without a restart.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kcoord.security.scram import ScramCredential, ScramMechanism
from kcoord.storage.atomic_file import write_atomically
from kcoord.storage.data_files import read_json_document

CREDENTIALS_FILE = "scram-credentials.json"
_FORMAT_VERSION = 1


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


Users = dict[str, dict[ScramMechanism, ScramCredential]]


def _encode(users: Users) -> bytes:
    document = {
        "version": _FORMAT_VERSION,
        "users": {
            user: {
                mechanism.sasl_name: {
                    "salt": _b64(c.salt),
                    "iterations": c.iterations,
                    "stored_key": _b64(c.stored_key),
                    "server_key": _b64(c.server_key),
                }
                for mechanism, c in sorted(by_mechanism.items(), key=lambda kv: kv[0].kafka_type)
            }
            for user, by_mechanism in sorted(users.items())
        },
    }
    return json.dumps(document, indent=1).encode("utf-8")


def _decode(document: Any) -> Users:
    if document.get("version") != _FORMAT_VERSION:
        raise ValueError(f"unknown credentials format {document.get('version')!r}")
    users: Users = {}
    for user, by_name in document["users"].items():
        entry: dict[ScramMechanism, ScramCredential] = {}
        for name, c in by_name.items():
            mechanism = ScramMechanism.from_sasl_name(name)
            if mechanism is None:
                raise ValueError(f"unknown mechanism {name!r} for user {user!r}")
            entry[mechanism] = ScramCredential(
                salt=base64.b64decode(c["salt"]),
                iterations=int(c["iterations"]),
                stored_key=base64.b64decode(c["stored_key"]),
                server_key=base64.b64decode(c["server_key"]),
            )
        users[user] = entry
    return users


class CredentialFile:
    """Blocking reads and atomic writes of the credentials file (for threads and the command line)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / CREDENTIALS_FILE

    def stamp(self) -> tuple[int, int] | None:
        """(mtime_ns, size) of the file, None when it does not exist: tells whether to re-read."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size

    def read(self) -> Users:
        """The users, none when there is no file (DataFileError when it is unreadable or corrupt)."""
        return read_json_document(self.path, _decode, {})

    def write(self, users: Users) -> None:
        write_atomically(self.path, _encode(users), mode=0o600)


class CredentialStore:
    """The server's view of the credentials: lookups from memory, changes written in a thread."""

    def __init__(self, data_dir: Path) -> None:
        self._file = CredentialFile(data_dir)
        self._password_checks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcoord-password")
        """PBKDF2 for PLAIN and HTTP Basic logins: one thread of its own, so a flood of guesses queues
        behind itself and never delays the log's or the loop's other work."""
        self._users: Users = {}
        self._stamp: tuple[int, int] | None = None
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the file (in a thread) if it changed since the last read."""
        stamp = await asyncio.to_thread(self._file.stamp)
        if stamp == self._stamp:
            return
        async with self._lock:
            self._users = await asyncio.to_thread(self._file.read)
            self._stamp = stamp

    def lookup(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def credentials_of(self, user: str) -> dict[ScramMechanism, ScramCredential]:
        return dict(self._users.get(user, {}))

    async def password_matches(self, user: str, password: str) -> bool:
        """Whether ``password`` derives one of ``user``'s stored credentials (computed off the loop)."""
        await self.load()
        loop = asyncio.get_running_loop()
        for mechanism, credential in self.credentials_of(user).items():
            if await loop.run_in_executor(
                self._password_checks, credential.password_matches, mechanism, password
            ):
                return True
        return False

    def close(self) -> None:
        """Stop the password-check thread; checks still queued are dropped."""
        self._password_checks.shutdown(wait=False, cancel_futures=True)

    def users(self) -> list[str]:
        return sorted(self._users)

    async def apply(
        self,
        upserts: Iterable[tuple[str, ScramMechanism, ScramCredential]],
        deletions: Iterable[tuple[str, ScramMechanism]],
    ) -> None:
        """Apply changes and make them durable before returning (file write in a worker thread)."""
        await self.load()
        async with self._lock:
            users = {user: dict(entry) for user, entry in self._users.items()}
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism, None)
                if user in users and not users[user]:
                    del users[user]
            for user, mechanism, credential in upserts:
                users.setdefault(user, {})[mechanism] = credential
            await asyncio.to_thread(self._file.write, users)
            self._users = users
            self._stamp = await asyncio.to_thread(self._file.stamp)
