"""The client side of SASL PLAIN (RFC 4616) and SCRAM (RFC 5802) for the command line's connections.

The SCRAM arithmetic is :class:`kcoord.security.scram.ScramMechanism`'s, the one the server checks
with. The client checks the server as well: the server's nonce must extend its own, the iteration
count must be at least the mechanism's minimum (4096, as Kafka's client), and the server's final
signature must prove it holds the ServerKey; otherwise the login fails before any request is sent.
"""

from __future__ import annotations

import base64
import hmac
import secrets

from kcoord.security.scram import MAX_ITERATIONS, ScramError, ScramMechanism, parse_attributes

__all__ = ["SaslLoginError", "ScramLogin", "plain_token"]


class SaslLoginError(Exception):
    """The server's SASL messages are malformed or do not prove what they must."""


def plain_token(username: str, password: str) -> bytes:
    """PLAIN's one message: authzid (empty), NUL, user, NUL, password."""
    return f"\0{username}\0{password}".encode()


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: bytes) -> dict[str, str]:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SaslLoginError("the server's SCRAM message is not UTF-8") from exc
    try:
        attributes = parse_attributes(text)
    except ScramError:
        raise SaslLoginError(f"malformed SCRAM message from the server: {text[:40]!r}") from None
    if "e" in attributes:
        raise SaslLoginError(f"the server refused the login: {attributes['e']}")
    return attributes


class ScramLogin:
    """One SCRAM exchange: :meth:`first`, :meth:`final` (given the server-first message), :meth:`verify`."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str) -> None:
        self._mechanism = mechanism
        self._password = password
        self._nonce = secrets.token_urlsafe(24)
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        attributes = _attributes(server_first)
        nonce, salt_text, iterations_text = (attributes.get(k, "") for k in ("r", "s", "i"))
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslLoginError("the server's nonce does not extend the client's")
        try:
            salt = base64.b64decode(salt_text, validate=True)
            iterations = int(iterations_text)
        except ValueError as exc:
            raise SaslLoginError("the server's salt or iteration count is malformed") from exc
        if not self._mechanism.min_iterations <= iterations <= MAX_ITERATIONS:
            raise SaslLoginError(
                f"the server asks for {iterations} iterations, outside 4096..{MAX_ITERATIONS}"
            )
        mechanism = self._mechanism
        salted = mechanism.salted_password(self._password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = mechanism.hmac(salted, b"Client Key")
        signature = mechanism.hmac(mechanism.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = mechanism.hmac(mechanism.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """Raise unless the server's final message carries the signature only the real server can make."""
        attributes = _attributes(server_final)
        try:
            signature = base64.b64decode(attributes.get("v", ""), validate=True)
        except ValueError as exc:
            raise SaslLoginError("the server's signature is not base64") from exc
        if not self._server_signature or not hmac.compare_digest(signature, self._server_signature):
            raise SaslLoginError("the server's signature does not match: it does not hold this user's keys")
