"""The client side of a SCRAM exchange, written from RFC 5802 for tests (independent of the server)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets


class ScramClient:
    def __init__(self, hash_name: str, user: str, password: str) -> None:
        self._hash = hash_name
        self._password = password
        self._nonce = secrets.token_urlsafe(18)
        self._first_bare = f"n={user},r={self._nonce}"

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attributes = dict(part.split("=", 1) for part in text.split(","))
        assert attributes["r"].startswith(self._nonce)
        salted = hashlib.pbkdf2_hmac(
            self._hash, self._password.encode(), base64.b64decode(attributes["s"]), int(attributes["i"])
        )
        without_proof = f"c=biws,r={attributes['r']}"
        auth = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", self._hash).digest()
        signature = hmac.new(hashlib.new(self._hash, client_key).digest(), auth, self._hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._expected = hmac.new(
            hmac.new(salted, b"Server Key", self._hash).digest(), auth, self._hash
        ).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        return server_final.decode() == "v=" + base64.b64encode(self._expected).decode()
