"""HTTP Basic credentials for the observability endpoint, checked against the SCRAM users.

Only the users named in ``kcoord.metrics.auth.users`` are let in, with the password of their SCRAM
credential (the same check as a SASL PLAIN login, in a worker thread). A refused header with
credentials is answered only after ``connection.failed.authentication.delay.ms``, as a failed
SASL login is.

A successful header is remembered for a minute under a keyed hash, so a Prometheus scrape every few
seconds does not cost a PBKDF2 derivation each time. It is remembered together with the user's
stored credential as it was then: once the password changes (or the user goes) the header is
checked again, and fails.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Hashable, Iterable

from kcoord.security.credentials import CredentialStore

_REMEMBER_S = 60.0


class BasicAuthenticator:
    def __init__(
        self,
        store: CredentialStore,
        users: Iterable[str],
        on_failure: Callable[[str | None], None],
        *,
        failure_delay_s: float = 0.0,
    ) -> None:
        self._store = store
        self._users = frozenset(users)
        self._on_failure = on_failure
        self._failure_delay_s = failure_delay_s
        self._key = secrets.token_bytes(32)
        self._remembered: dict[bytes, tuple[float, Hashable]] = {}

    async def __call__(self, authorization: str | None) -> bool:
        """Whether the ``Authorization`` header value names an allowed user with the right password."""
        user = None
        if authorization is not None:
            user, password = _decode(authorization)
            # The password is checked for users not let in too, so the time taken tells nothing.
            if await self._check(authorization, user, password) and user in self._users:
                return True
        self._on_failure(user)
        if authorization is not None and self._failure_delay_s > 0:
            await asyncio.sleep(self._failure_delay_s)
        return False

    async def _check(self, authorization: str, user: str | None, password: str | None) -> bool:
        if user is None or password is None:
            return False
        await self._store.load()
        stored = self._stored(user)
        digest = hmac.new(self._key, authorization.encode("latin-1", "replace"), hashlib.sha256).digest()
        now = time.monotonic()
        expiry, remembered_stored = self._remembered.get(digest, (0.0, None))
        if expiry > now and remembered_stored == stored:
            return True
        if not await self._store.password_matches(user, password):
            self._remembered.pop(digest, None)
            return False
        if len(self._remembered) > 1000:
            self._remembered = {k: v for k, v in self._remembered.items() if v[0] > now}
        self._remembered[digest] = (now + _REMEMBER_S, stored)
        return True

    def _stored(self, user: str) -> Hashable:
        """The user's stored credentials as they are now (a password change changes them)."""
        credentials = self._store.credentials_of(user)
        return tuple(sorted((m.kafka_type, c.salt, c.stored_key) for m, c in credentials.items()))


def _decode(authorization: str) -> tuple[str | None, str | None]:
    scheme, _, encoded = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None, None
    try:
        text = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    user, sep, password = text.partition(":")
    return (user, password) if sep else (None, None)
