"""One connection's SASL authentication on a SASL_PLAINTEXT or SASL_SSL listener.

The exchange, as Kafka's ``SaslServerAuthenticator``:

1. the client may ask ApiVersions, then sends SaslHandshake naming a mechanism (one that is not
   enabled fails the exchange);
2. with SaslHandshake v1 the tokens travel in SaslAuthenticate requests; with v0 they travel as
   raw size-prefixed frames without any Kafka header (old clients), answered the same way;
3. success sets the connection's principal (``User:<name>``); failure is logged, counted and
   answered only after ``connection.failed.authentication.delay.ms``, and the connection is then
   closed.

Until the exchange succeeds only ApiVersions, SaslHandshake and SaslAuthenticate are served.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from kcoord.security.credentials import CredentialStore
from kcoord.security.principal import KafkaPrincipal
from kcoord.security.scram import ScramError, ScramMechanism, ScramServer
from kcoord.security.scram_decoy import ScramDecoySource

log = structlog.get_logger(__name__)

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *(m.sasl_name for m in ScramMechanism))


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class AuthenticationFailedError(Exception):
    """The credentials were wrong or the exchange was malformed; the message goes to the client."""


class IllegalSaslStateError(Exception):
    """A SASL request arrived out of order (e.g. SaslAuthenticate before SaslHandshake)."""


@dataclass(frozen=True, slots=True)
class SaslSettings:
    mechanisms: Sequence[str]
    failure_delay_s: float
    store: CredentialStore
    on_failure: Callable[[str], None]
    """Called with the mechanism on every failed login (the metric)."""
    max_receive_bytes: int = 524288
    """``sasl.server.max.receive.size``: the largest frame accepted before authentication."""
    decoy: ScramDecoySource | None = None
    """What SCRAM shows for unknown users (None: a key that lives as long as the process)."""


class PlainServer:
    """RFC 4616: one message ``authzid NUL authcid NUL passwd``, checked against the SCRAM credentials."""

    def __init__(self, store: CredentialStore) -> None:
        self._store = store
        self.username: str | None = None
        self.complete = False

    async def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailedError("malformed PLAIN message")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError as exc:
            raise AuthenticationFailedError("PLAIN message is not UTF-8") from exc
        if not user or (authzid and authzid != user):
            raise AuthenticationFailedError("authorization id differs from the user name")
        self.username = user
        if await self._store.password_matches(user, password):
            self.complete = True
            return b""
        raise AuthenticationFailedError("authentication failed: invalid user name or password")


class SaslSession:
    """The SASL state of one connection."""

    def __init__(self, settings: SaslSettings, peer: str) -> None:
        self._settings = settings
        self._peer = peer
        self.state = SaslState.HANDSHAKE
        self.raw_tokens = False
        """True after a v0 SaslHandshake: the next frames are bare SASL tokens."""
        self.mechanism: str | None = None
        self._server: ScramServer | PlainServer | None = None
        self.principal: KafkaPrincipal | None = None

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    @property
    def max_receive_bytes(self) -> int:
        return self._settings.max_receive_bytes

    @property
    def enabled_mechanisms(self) -> list[str]:
        return [m for m in self._settings.mechanisms if m in SUPPORTED_MECHANISMS]

    async def handshake(self, mechanism: str, version: int) -> bool:
        """Choose ``mechanism``; False when it is not enabled (UNSUPPORTED_SASL_MECHANISM): a
        failed authentication, delayed and counted, after which the connection is closed."""
        if self.state is not SaslState.HANDSHAKE:
            raise IllegalSaslStateError(f"SaslHandshake in state {self.state.value}")
        if mechanism not in self.enabled_mechanisms:
            await self._fail(None, f"unsupported mechanism {mechanism[:64]!r}")
            return False
        await self._settings.store.before_login()
        scram = ScramMechanism.from_sasl_name(mechanism)
        store = self._settings.store
        if scram is None:
            self._server = PlainServer(store)
        elif self._settings.decoy is None:
            self._server = ScramServer(scram, store.lookup)
        else:
            self._server = ScramServer(scram, store.lookup, decoy=await self._settings.decoy.ready())
        self.mechanism = mechanism
        self.state = SaslState.AUTHENTICATE
        self.raw_tokens = version == 0
        return True

    async def authenticate(self, token: bytes) -> bytes:
        """The server's answer to one client token; raises AuthenticationFailedError after the delay."""
        server = self._server
        if self.state is not SaslState.AUTHENTICATE or server is None:
            raise IllegalSaslStateError(f"SaslAuthenticate in state {self.state.value}")
        if not self._settings.store.fresh():
            age = self._settings.store.freshness.age_s()
            await self._fail(
                server.username,
                "this node's copy of the cluster's credentials is stale "
                f"({'never read' if age is None else f'last read {age:.1f} s ago'})",
            )
            raise AuthenticationFailedError(
                f"Authentication failed: the credentials cannot be checked now (SASL mechanism "
                f"{self.mechanism}); retry later"
            )
        try:
            if isinstance(server, PlainServer):
                answer = await server.evaluate(token)
            else:
                answer = server.evaluate(token)
        except (ScramError, AuthenticationFailedError) as exc:
            await self._fail(server.username, str(exc))
            raise AuthenticationFailedError(
                f"Authentication failed during authentication due to invalid credentials with SASL "
                f"mechanism {self.mechanism}"
            ) from exc
        if server.complete and server.username is not None:
            self.state = SaslState.AUTHENTICATED
            self.raw_tokens = False
            self.principal = KafkaPrincipal.user(server.username)
            log.info(
                "sasl.authenticated", principal=str(self.principal), mechanism=self.mechanism, peer=self._peer
            )
        return answer

    async def break_off(self, reason: str) -> None:
        """The client broke the exchange's order: a failed authentication (counted, logged, then
        the delay), after which the connection is closed."""
        await self._fail(None, reason)

    async def _fail(self, user: str | None, reason: str) -> None:
        self.state = SaslState.FAILED
        mechanism = self.mechanism or "?"
        self._settings.on_failure(mechanism)
        log.warning(
            "sasl.authentication_failed", user=user, mechanism=mechanism, peer=self._peer, reason=reason
        )
        if self._settings.failure_delay_s > 0:
            await asyncio.sleep(self._settings.failure_delay_s)
