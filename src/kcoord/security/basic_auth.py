"""HTTP Basic credentials for the observability endpoint, checked against the SCRAM users.

Only the users named in ``kcoord.metrics.auth.users`` are let in, with the password of their SCRAM
credential (the same check as a SASL PLAIN login, in a worker thread). A successful header is
remembered for a minute under a keyed hash, so a Prometheus scrape every few seconds does not
cost a PBKDF2 derivation each time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable

from kcoord.security.credentials import CredentialStore

_REMEMBER_S = 60.0


class BasicAuthenticator:
    def __init__(
        self, store: CredentialStore, users: Iterable[str], on_failure: Callable[[str | None], None]
    ) -> None:
        self._store = store
        self._users = frozenset(users)
        self._on_failure = on_failure
        self._key = secrets.token_bytes(32)
        self._remembered: dict[bytes, float] = {}

    async def __call__(self, authorization: str | None) -> bool:
        """Whether the ``Authorization`` header value names an allowed user with the right password."""
        user = None
        if authorization is not None:
            digest = hmac.new(self._key, authorization.encode("latin-1", "replace"), hashlib.sha256).digest()
            now = time.monotonic()
            if self._remembered.get(digest, 0.0) > now:
                return True
            user, password = _decode(authorization)
            if (
                user in self._users
                and password is not None
                and await self._store.password_matches(user, password)
            ):
                if len(self._remembered) > 1000:
                    self._remembered = {k: v for k, v in self._remembered.items() if v > now}
                self._remembered[digest] = now + _REMEMBER_S
                return True
        self._on_failure(user)
        return False


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
