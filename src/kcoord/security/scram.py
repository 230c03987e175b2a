"""SCRAM-SHA-256 and SCRAM-SHA-512, the server side of RFC 5802 (with RFC 7677's hash choice).

The server never holds a password: a credential is the salt, the iteration count, the
``StoredKey`` (H(HMAC(SaltedPassword, "Client Key"))) and the ``ServerKey``
(HMAC(SaltedPassword, "Server Key")), as Kafka's ``ScramCredential``. A login is two round trips:

1. client-first ``n,,n=user,r=cnonce`` -> server-first ``r=cnonce+snonce,s=salt,i=iterations``
2. client-final ``c=biws,r=nonce,p=proof`` -> server-final ``v=signature`` (or ``e=...``)

The client proves knowledge of the salted password by ``proof = ClientKey XOR ClientSignature``;
the server recovers ClientKey from the proof and checks ``H(ClientKey) == StoredKey``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum


class ScramMechanism(Enum):
    """The SCRAM mechanisms with Kafka's wire numbers (AlterUserScramCredentials' ``mechanism``)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 1, 4096)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 2, 4096)

    def __init__(self, sasl_name: str, hash_name: str, kafka_type: int, min_iterations: int) -> None:
        self.sasl_name = sasl_name
        self.hash_name = hash_name
        self.kafka_type = kafka_type
        self.min_iterations = min_iterations

    @classmethod
    def from_sasl_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.sasl_name == name), None)

    @classmethod
    def from_kafka_type(cls, kafka_type: int) -> ScramMechanism | None:
        return next((m for m in cls if m.kafka_type == kafka_type), None)

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC of this hash."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


MAX_ITERATIONS = 16384
"""Kafka's ceiling for a credential's iteration count."""

DEFAULT_ITERATIONS = 8192
"""The iteration count ``kcoord users add`` gives a credential (and an unknown user's decoy)."""

DEFAULT_SALT_BYTES = 32
"""The salt length ``kcoord users add`` gives a credential (and an unknown user's decoy)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salted_password: bytes, salt: bytes, iterations: int
    ) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(
            salt=salt,
            iterations=iterations,
            stored_key=mechanism.hash(client_key),
            server_key=mechanism.hmac(salted_password, b"Server Key"),
        )

    @classmethod
    def from_password(
        cls,
        mechanism: ScramMechanism,
        password: str,
        iterations: int = DEFAULT_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        salt = salt if salt is not None else secrets.token_bytes(DEFAULT_SALT_BYTES)
        salted = mechanism.salted_password(password, salt, iterations)
        return cls.from_salted_password(mechanism, salted, salt, iterations)

    def password_matches(self, mechanism: ScramMechanism, password: str) -> bool:
        """Whether ``password`` derives this credential (how PLAIN logins are checked)."""
        salted = mechanism.salted_password(password, self.salt, self.iterations)
        stored = mechanism.hash(mechanism.hmac(salted, b"Client Key"))
        return hmac.compare_digest(stored, self.stored_key)


CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]
"""``lookup(user, mechanism)``: the user's stored credential for that mechanism, or None."""


class ScramDecoy:
    """The made-up (salt, iterations) shown for a user who does not exist, under one secret key:
    the iteration count ``kcoord users add`` gives, and a salt of its length, stable per user name
    and mechanism (repeated probes see the same salt, as for a real user) yet not derivable from
    public data (HMAC-SHA-256 under the key)."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def parameters(self, user: str, mechanism: ScramMechanism) -> tuple[bytes, int]:
        message = mechanism.sasl_name.encode() + b"\x00" + user.encode("utf-8", "surrogatepass")
        salt = hmac.new(self._key, message, hashlib.sha256).digest()[:DEFAULT_SALT_BYTES]
        return salt, DEFAULT_ITERATIONS


_PROCESS_DECOY = ScramDecoy(secrets.token_bytes(32))
"""The decoy of exchanges given none: its key lives as long as the process."""


class ScramError(Exception):
    """The exchange failed; the message is safe to send to the client."""


def parse_attributes(message: str) -> dict[str, str]:
    """RFC 5802's ``k=value,k=value`` message, first value of each key kept; raises ScramError
    for a part that is not a one-letter key with a value (both sides' messages have this form)."""
    attributes: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"malformed SCRAM attribute {part[:20]!r}")
        attributes.setdefault(key, value)
    return attributes


def _unescape_username(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma and ``=3D`` an equals sign; any other ``=`` is invalid."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ScramError("invalid user name encoding")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


class ScramServer:
    """One SCRAM exchange on the server side; ``lookup(user)`` returns the user's credential or None.

    An unknown user gets a server-first message with ``decoy``'s salt and iteration count, so
    the answer does not reveal whether the user exists; the exchange then fails at the proof like
    a wrong password.
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: CredentialLookup,
        server_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
        decoy: ScramDecoy = _PROCESS_DECOY,
    ) -> None:
        self.mechanism = mechanism
        self._decoy = decoy
        self._server_nonce = server_nonce
        self._lookup = lookup
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._known = False
        """Whether ``_credential`` is the user's, not the decoy's."""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to the client's next message; raises ScramError when the login fails."""
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScramError("SCRAM message is not UTF-8") from exc
        if self.complete:
            raise ScramError("SCRAM exchange already complete")
        if self.username is None:
            return self._client_first(message).encode("utf-8")
        return self._client_final(message).encode("utf-8")

    def _client_first(self, message: str) -> str:
        gs2_flag, sep, rest = message.partition(",")
        if not sep or gs2_flag not in ("n", "y"):
            raise ScramError("channel binding is not supported")
        authzid, sep, bare = rest.partition(",")
        if not sep:
            raise ScramError("malformed client-first message")
        attributes = parse_attributes(bare)
        if "m" in attributes:
            raise ScramError("mandatory SCRAM extensions are not supported")
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise ScramError("client-first message lacks a user name or nonce")
        username = _unescape_username(attributes["n"])
        if authzid.startswith("a=") and _unescape_username(authzid[2:]) != username:
            raise ScramError("authorization id differs from the user name")
        self.username = username
        self._client_first_bare = bare
        self._credential = self._lookup(username, self.mechanism)
        self._known = self._credential is not None
        if self._credential is None:
            # The proof is then checked as a real one is, against keys nobody can match.
            salt, iterations = self._decoy.parameters(username, self.mechanism)
            size = len(self.mechanism.hash(b""))
            self._credential = ScramCredential(
                salt, iterations, secrets.token_bytes(size), secrets.token_bytes(size)
            )
        salt, iterations = self._credential.salt, self._credential.iterations
        self._nonce = attributes["r"] + self._server_nonce()
        self._server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        return self._server_first

    def _client_final(self, message: str) -> str:
        without_proof, sep, proof_part = message.rpartition(",p=")
        if not sep:
            raise ScramError("client-final message lacks a proof")
        attributes = parse_attributes(without_proof)
        # Kafka accepts a final nonce that ends with the server-first one, and librdkafka 2.0.x
        # relies on that (it sends the client nonce twice); a shorter or different nonce is refused.
        if not attributes.get("r", "").endswith(self._nonce):
            raise ScramError("nonce mismatch")
        channel_binding = attributes.get("c", "")
        if channel_binding not in ("biws", "eSws"):
            raise ScramError("unexpected channel binding")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError as exc:
            raise ScramError("proof is not base64") from exc
        credential = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        if credential is None or len(proof) != len(credential.stored_key):
            raise ScramError("authentication failed")
        client_signature = self.mechanism.hmac(credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        matches = hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key)
        if not (matches and self._known):
            raise ScramError("authentication failed")
        self.complete = True
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        return "v=" + base64.b64encode(server_signature).decode()
