"""SCRAM-SHA-512 login for the load generator's raw connections (RFC 5802 client side)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_HASH = "sha512"

Call = Callable[[int, int, dict[str, Any]], Awaitable[Any]]


async def scram_sha_512_login(call: Call, user: str, password: str) -> None:
    """SaslHandshake v1, then two SaslAuthenticate v2 round trips; raises unless the server's proof checks."""
    handshake = await call(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
    if int(handshake.error_code) != 0:
        raise RuntimeError(f"SaslHandshake: error {int(handshake.error_code)}")
    nonce = secrets.token_urlsafe(18)
    first_bare = f"n={user},r={nonce}"
    first = await call(SASL_AUTHENTICATE, 2, {"auth_bytes": f"n,,{first_bare}".encode()})
    if int(first.error_code) != 0:
        raise RuntimeError(f"SaslAuthenticate: error {int(first.error_code)}")
    server_first = bytes(first.auth_bytes).decode()
    attributes = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        _HASH, password.encode(), base64.b64decode(attributes["s"]), int(attributes["i"])
    )
    without_proof = f"c=biws,r={attributes['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", _HASH).digest()
    signature = hmac.new(hashlib.sha512(client_key).digest(), auth, _HASH).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    final = await call(SASL_AUTHENTICATE, 2, {"auth_bytes": f"{without_proof},p={proof}".encode()})
    if int(final.error_code) != 0:
        raise RuntimeError(f"SaslAuthenticate: error {int(final.error_code)}")
    expected = hmac.new(hmac.new(salted, b"Server Key", _HASH).digest(), auth, _HASH).digest()
    if bytes(final.auth_bytes).decode() != "v=" + base64.b64encode(expected).decode():
        raise RuntimeError("the server's SCRAM signature does not verify")
