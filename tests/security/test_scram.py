"""SCRAM server exchanges (RFC 5802/7677), pinned by the RFC's test vector and a client written here."""

from __future__ import annotations

import base64
import hashlib
import hmac
import stat
import time
from pathlib import Path

import pytest

from kcoord.cli import users as users_cli
from kcoord.security.credentials import CredentialFile, CredentialStore, credentials_file
from kcoord.security.scram import (
    DEFAULT_SALT_BYTES,
    ScramCredential,
    ScramDecoy,
    ScramError,
    ScramMechanism,
    ScramServer,
)
from kcoord.security.scram_decoy import DECOY_KEY_FILE, load_or_create_key

RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def _lookup_for(user: str, credential: ScramCredential):  # type: ignore[no-untyped-def]
    return lambda name, mechanism: credential if name == user else None


def _client_proof(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int, auth: bytes
) -> bytes:
    """The client side of RFC 5802, written from the RFC for the test (independent of the server)."""
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    signature = hmac.new(stored_key, auth, mechanism.hash_name).digest()
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


def test_rfc7677_test_vector() -> None:
    """The SCRAM-SHA-256 exchange of RFC 7677 section 3 yields exactly the RFC's server signature."""
    credential = ScramCredential.from_password(ScramMechanism.SCRAM_SHA_256, "pencil", 4096, RFC7677_SALT)
    server = ScramServer(
        ScramMechanism.SCRAM_SHA_256,
        _lookup_for("user", credential),
        server_nonce=lambda: RFC7677_SERVER_NONCE,
    )
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


def _exchange(mechanism: ScramMechanism, stored_password: str, password: str, user: str = "alice") -> bytes:
    credential = ScramCredential.from_password(mechanism, stored_password, 4096)
    server = ScramServer(mechanism, _lookup_for("alice", credential))
    client_first_bare = f"n={user},r=clientnonce"
    first = server.evaluate(f"n,,{client_first_bare}".encode()).decode()
    attributes = dict(part.split("=", 1) for part in first.split(","))
    without_proof = f"c=biws,r={attributes['r']}"
    auth = f"{client_first_bare},{first},{without_proof}".encode()
    proof = _client_proof(mechanism, password, base64.b64decode(attributes["s"]), int(attributes["i"]), auth)
    return server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_right_password_logs_in(mechanism: ScramMechanism) -> None:
    """A client that knows the password completes the exchange with either hash."""
    assert _exchange(mechanism, "s3cret", "s3cret").startswith(b"v=")


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_wrong_password_fails(mechanism: ScramMechanism) -> None:
    """A wrong password fails at the proof."""
    with pytest.raises(ScramError, match="authentication failed"):
        _exchange(mechanism, "s3cret", "guess")


def test_unknown_user_fails_like_a_wrong_password() -> None:
    """An unknown user still gets a salt and iteration count, then fails at the proof."""
    with pytest.raises(ScramError, match="authentication failed"):
        _exchange(ScramMechanism.SCRAM_SHA_512, "s3cret", "s3cret", user="mallory")


@pytest.mark.parametrize(
    "message",
    [
        b"p=tls-unique,,n=alice,r=x",
        b"n,,r=x",
        b"n,,n=alice",
        b"n,,m=ext,n=alice,r=x",
        b"n,,n=al=ZZ,r=x",
        b"\xff",
    ],
)
def test_malformed_client_first_is_refused(message: bytes) -> None:
    """Channel binding, missing attributes, mandatory extensions and bad encodings are refused."""
    server = ScramServer(ScramMechanism.SCRAM_SHA_256, lambda user, mechanism: None)
    with pytest.raises(ScramError):
        server.evaluate(message)


def test_plain_password_check_uses_the_stored_keys() -> None:
    """PLAIN logins are checked against the SCRAM credential: the password itself is never stored."""
    credential = ScramCredential.from_password(ScramMechanism.SCRAM_SHA_512, "s3cret", 4096)
    assert b"s3cret" not in credential.stored_key + credential.server_key + credential.salt
    assert credential.password_matches(ScramMechanism.SCRAM_SHA_512, "s3cret")
    assert not credential.password_matches(ScramMechanism.SCRAM_SHA_512, "s3cre")


def test_final_nonce_may_repeat_the_client_nonce_as_librdkafka_2_0_sends_it() -> None:
    """librdkafka 2.0.x (kcat on Debian) repeats the client nonce in its final nonce; Kafka accepts it too."""
    mechanism = ScramMechanism.SCRAM_SHA_512
    credential = ScramCredential.from_password(mechanism, "s3cret", 4096)
    server = ScramServer(mechanism, _lookup_for("alice", credential))
    first = server.evaluate(b"n,,n=alice,r=cnonce").decode()
    attributes = dict(part.split("=", 1) for part in first.split(","))
    without_proof = f"c=biws,r=cnonce{attributes['r']}"
    auth = f"n=alice,r=cnonce,{first},{without_proof}".encode()
    proof = _client_proof(mechanism, "s3cret", base64.b64decode(attributes["s"]), 4096, auth)
    assert server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode()).startswith(b"v=")
    other = ScramServer(mechanism, _lookup_for("alice", credential))
    other.evaluate(b"n,,n=alice,r=cnonce")
    with pytest.raises(ScramError, match="nonce"):
        other.evaluate(b"c=biws,r=cnonce,p=AAAA")


def test_decoy_parameters_are_those_of_users_add_and_keyed() -> None:
    """The decoy shows ``kcoord users add``'s iteration count and salt length; its salt depends on
    the key, the name and the mechanism, and on nothing else."""
    one, other = ScramDecoy(b"k" * 32), ScramDecoy(b"j" * 32)
    salt, iterations = one.parameters("mallory", ScramMechanism.SCRAM_SHA_512)
    assert (len(salt), iterations) == (DEFAULT_SALT_BYTES, users_cli.DEFAULT_ITERATIONS)
    assert one.parameters("mallory", ScramMechanism.SCRAM_SHA_512) == (salt, iterations)
    assert salt not in {
        one.parameters("trent", ScramMechanism.SCRAM_SHA_512)[0],
        one.parameters("mallory", ScramMechanism.SCRAM_SHA_256)[0],
        other.parameters("mallory", ScramMechanism.SCRAM_SHA_512)[0],
    }


def test_decoy_key_is_made_once_private_and_kept(tmp_path: Path) -> None:
    """The key file is created 0600 on first need and read back unchanged afterwards."""
    key = load_or_create_key(tmp_path)
    assert stat.S_IMODE((tmp_path / DECOY_KEY_FILE).stat().st_mode) == 0o600
    assert load_or_create_key(tmp_path) == key and len(key) == 32


async def test_an_unknown_users_password_check_costs_what_a_real_users_does(tmp_path: Path) -> None:
    """PLAIN and HTTP Basic checks of an unknown user run the derivations of a ``kcoord users add``
    user, so a wrong password takes as long for a stranger as for a real user (fastest of 5 each)."""
    CredentialFile(tmp_path).write(
        {"alice": {m: ScramCredential.from_password(m, "s3cret") for m in ScramMechanism}}
    )
    store = CredentialStore(credentials_file(tmp_path))
    try:

        async def fastest(user: str) -> float:
            times = []
            for _ in range(5):
                started = time.perf_counter()
                assert not await store.password_matches(user, "guess")
                times.append(time.perf_counter() - started)
            return min(times)

        known, unknown = await fastest("alice"), await fastest("mallory")
    finally:
        store.close()
    assert unknown >= known / 2, (known, unknown)
