"""SCRAM credentials of the users who may log in: ``scram-credentials.json`` in a single node's data
dir, or the cluster's shared document in PostgreSQL (:mod:`kcoord.storage.documents`).

Only salted, iterated keys are stored (salt, iterations, StoredKey, ServerKey per mechanism), never
a password. The document is rewritten whole (a file: temporary file, fsync, rename, fsync of the
directory; the database: one transaction), so a crash leaves the old or the new set. A single node
re-reads its file when it changed on disk, so ``kcoord users add`` on the data directory takes
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

import structlog

from kcoord.security.scram import (
    DEFAULT_ITERATIONS,
    DEFAULT_SALT_BYTES,
    ScramCredential,
    ScramMechanism,
)
from kcoord.storage.data_files import parse_document
from kcoord.storage.documents import FileDocument, Freshness, StateDocument

log = structlog.get_logger(__name__)

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


def credentials_file(data_dir: Path) -> FileDocument:
    """A single node's credentials document (owner-only: it holds salted keys)."""
    return FileDocument(data_dir / CREDENTIALS_FILE, mode=0o600)


def decode_users(document: Any, location: str) -> Users:
    """The users of a credentials document (none for no document); DataFileError naming
    ``location`` when it is not a document kcoord wrote."""
    if document is None:
        return {}
    return parse_document(location, _decode, document)


def encode_users(users: Users) -> Any:
    return json.loads(_encode(users))


class CredentialFile:
    """Blocking reads and atomic writes of a data directory's credentials file (for tests and tools)."""

    def __init__(self, data_dir: Path) -> None:
        self._document = credentials_file(data_dir)
        self.path = self._document.path

    def read(self) -> Users:
        """The users, none when there is no file (DataFileError when it is unreadable or corrupt)."""
        return decode_users(self._document.read(), str(self.path))

    def write(self, users: Users) -> None:
        self._document.write(encode_users(users))


class CredentialStore:
    """The server's view of the credentials: lookups from memory, changes made durable first.

    ``reread_on_login``: a file is re-read at each login when it changed on disk (a cheap stat), so
    ``kcoord users add`` on the data directory applies at once; the cluster's shared document is
    polled instead (:mod:`kcoord.cluster.shared_state`), and a login is refused while the node's
    copy is older than the staleness bound (``freshness``).
    """

    def __init__(
        self,
        document: StateDocument,
        *,
        reread_on_login: bool = True,
        freshness: Freshness | None = None,
    ) -> None:
        self._document = document
        self._reread_on_login = reread_on_login
        self.freshness = freshness or Freshness.always()
        self._password_checks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcoord-password")
        """PBKDF2 for PLAIN and HTTP Basic logins: one thread of its own, so a flood of guesses queues
        behind itself and never delays the log's or the loop's other work."""
        self._users: Users = {}
        self._lock = asyncio.Lock()

    @property
    def location(self) -> str:
        return self._document.location

    async def load(self) -> None:
        """Read the document if it changed since the last read."""
        async with self._lock:
            changed, document = await self._document.read_if_changed()
            if changed:
                self._users = decode_users(document, self.location)

    async def refresh(self) -> None:
        """The poller's step: take another node's changes."""
        before = self._users
        await self.load()
        if self._users is not before:
            log.info("scram_credentials.refreshed", users=len(self._users), location=self.location)

    async def before_login(self) -> None:
        """Bring the users up to date for a login, where that is cheap (a file's stamp)."""
        if self._reread_on_login:
            await self.load()

    def fresh(self) -> bool:
        """Whether these credentials may decide a login now (cluster: polled recently enough)."""
        return self.freshness.fresh()

    def lookup(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def credentials_of(self, user: str) -> dict[ScramMechanism, ScramCredential]:
        return dict(self._users.get(user, {}))

    async def password_matches(self, user: str, password: str) -> bool:
        """Whether ``password`` derives one of ``user``'s stored credentials (computed off the loop);
        False while the credentials are stale.

        An unknown user costs the derivations of a user made by ``kcoord users add``, so the time
        the answer takes does not tell whether the user exists."""
        await self.before_login()
        if not self.fresh():
            log.warning("scram_credentials.stale", user=user, age_s=self.freshness.age_s())
            return False
        loop = asyncio.get_running_loop()
        credentials = self.credentials_of(user)
        if not credentials:
            await loop.run_in_executor(self._password_checks, _decoy_derivations, password)
            return False
        for mechanism, credential in credentials.items():
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
        """Apply changes to the credentials as stored now; durable before returning."""
        changes = list(upserts), list(deletions)
        location = self.location

        def change(document: Any) -> Any:
            return encode_users(changed_users(decode_users(document, location), *changes))

        async with self._lock:
            self._users = decode_users(await self._document.update(change), location)


def changed_users(
    users: Users,
    upserts: Iterable[tuple[str, ScramMechanism, ScramCredential]],
    deletions: Iterable[tuple[str, ScramMechanism]],
) -> Users:
    """``users`` after deleting then upserting the given credentials."""
    result = {user: dict(entry) for user, entry in users.items()}
    for user, mechanism in deletions:
        result.get(user, {}).pop(mechanism, None)
        if user in result and not result[user]:
            del result[user]
    for user, mechanism, credential in upserts:
        result.setdefault(user, {})[mechanism] = credential
    return result


def _decoy_derivations(password: str) -> None:
    for mechanism in ScramMechanism:
        ScramCredential.from_password(mechanism, password, DEFAULT_ITERATIONS, salt=bytes(DEFAULT_SALT_BYTES))
