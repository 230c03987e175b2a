"""SASL listeners in process, over real sockets: the exchange, what is served before it, failures, v0."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import stat
import struct
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from kcoord.security.credentials import CredentialFile
from kcoord.security.scram import ScramCredential, ScramMechanism
from kcoord.security.scram_decoy import DECOY_KEY_FILE
from tests.protocol.in_process import connected, decode_response, legacy_header_frame, running_app
from tests.support.scram_client import ScramClient
from tests.support.secure_server import add_user

SASL_AND_PLAIN = "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"


def _add_user(data_dir: Path, user: str, password: str) -> None:
    users = CredentialFile(data_dir).read()
    users[user] = {m: ScramCredential.from_password(m, password, 4096) for m in ScramMechanism}
    CredentialFile(data_dir).write(users)


async def _scram_login(client, hash_name: str, user: str, password: str):  # type: ignore[no-untyped-def]
    mechanism = {"sha256": "SCRAM-SHA-256", "sha512": "SCRAM-SHA-512"}[hash_name]
    handshake = await client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    assert handshake.error_code == ErrorCode.none
    scram = ScramClient(hash_name, user, password)
    first = await client.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.first()})
    assert first.error_code == ErrorCode.none
    final = await client.call(
        ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.final(bytes(first.auth_bytes))}
    )
    return scram, final


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
async def test_scram_login_then_requests_are_served(tmp_path: Path, hash_name: str) -> None:
    """After a SCRAM exchange the server's signature verifies and ordinary requests are answered."""
    _add_user(tmp_path, "alice", "s3cret")
    async with running_app(tmp_path, listeners=SASL_AND_PLAIN) as (_, port), connected(port) as client:
        versions = await client.call(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        assert versions.error_code == ErrorCode.none
        scram, final = await _scram_login(client, hash_name, "alice", "s3cret")
        assert final.error_code == ErrorCode.none
        assert scram.verify(bytes(final.auth_bytes))
        metadata = await client.call(
            ApiKey.METADATA,
            12,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        assert [b.port for b in metadata.brokers] == [port]


async def test_request_before_authentication_closes_the_connection(tmp_path: Path) -> None:
    """Metadata before SASL authentication is not answered: the connection is closed, as Kafka does."""
    async with running_app(tmp_path, listeners=SASL_AND_PLAIN) as (_, port), connected(port) as client:
        await client.send(
            ApiKey.METADATA,
            12,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        assert await client.closed_by_server()


async def test_wrong_password_is_delayed_counted_and_ends_the_session(tmp_path: Path) -> None:
    """A wrong password gets SASL_AUTHENTICATION_FAILED after the delay, is counted, and ends the session."""
    _add_user(tmp_path, "alice", "s3cret")
    overrides = {"listeners": SASL_AND_PLAIN, "connection.failed.authentication.delay.ms": "300"}
    async with running_app(tmp_path, **overrides) as (app, port), connected(port) as client:
        started = time.monotonic()
        _, final = await _scram_login(client, "sha512", "alice", "guess")
        assert final.error_code == ErrorCode.sasl_authentication_failed
        assert time.monotonic() - started >= 0.3
        labels = {"listener": "SASL_PLAINTEXT", "mechanism": "SCRAM-SHA-512"}
        assert app.metrics.registry.get_sample_value("kcoord_authentication_failures_total", labels) == 1
        assert await client.closed_by_server(), "the server closes the connection after the failure answer"


async def test_unsupported_mechanism_lists_the_enabled_ones_then_closes(tmp_path: Path) -> None:
    """A mechanism kcoord does not offer gets UNSUPPORTED_SASL_MECHANISM and the enabled list, is
    counted as a failed login, and the connection is closed, as Kafka closes it."""
    async with running_app(tmp_path, listeners=SASL_AND_PLAIN) as (app, port), connected(port) as client:
        answer = await client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert await client.closed_by_server()
        labels = {"listener": "SASL_PLAINTEXT", "mechanism": "?"}
        assert app.metrics.registry.get_sample_value("kcoord_authentication_failures_total", labels) == 1


async def test_sasl_authenticate_before_handshake_closes_unanswered(tmp_path: Path) -> None:
    """SaslAuthenticate with no SaslHandshake before it is a failed login: counted, and the
    connection is closed without an answer after the failure delay."""
    _add_user(tmp_path, "alice", "s3cret")
    overrides = {"listeners": SASL_AND_PLAIN, "connection.failed.authentication.delay.ms": "300"}
    async with running_app(tmp_path, **overrides) as (app, port), connected(port) as client:
        started = time.monotonic()
        await client.send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00s3cret"})
        assert await client.closed_by_server()
        assert time.monotonic() - started >= 0.3
        labels = {"listener": "SASL_PLAINTEXT", "mechanism": "?"}
        assert app.metrics.registry.get_sample_value("kcoord_authentication_failures_total", labels) == 1


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}),
        (ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}),
    ],
)
async def test_other_requests_during_the_exchange_get_illegal_sasl_state_then_close(
    tmp_path: Path, api_key: ApiKey, version: int, body: dict[str, str]
) -> None:
    """After SaslHandshake v1 only SaslAuthenticate is served: another request is answered
    ILLEGAL_SASL_STATE and the connection is closed."""
    async with running_app(tmp_path, listeners=SASL_AND_PLAIN) as (_, port), connected(port) as client:
        handshake = await client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
        assert handshake.error_code == ErrorCode.none
        refused = await client.call(api_key, version, body)
        assert refused.error_code == ErrorCode.illegal_sasl_state
        assert await client.closed_by_server()


async def test_a_second_api_versions_before_the_handshake_closes(tmp_path: Path) -> None:
    """ApiVersions is answered once before SaslHandshake (an unsupported version's refusal does not
    count, so a client may step down); a second answered one closes the connection."""
    async with running_app(tmp_path, listeners=SASL_AND_PLAIN) as (_, port), connected(port) as client:
        await client.send_frame(legacy_header_frame(ApiKey.API_VERSIONS, 99, 77))
        stepped_down = decode_response(ApiKey.API_VERSIONS, 0, await client.recv_frame(), 77)
        assert stepped_down.error_code == ErrorCode.unsupported_version
        body = {"client_software_name": "t", "client_software_version": "1"}
        assert (await client.call(ApiKey.API_VERSIONS, 3, body)).error_code == ErrorCode.none
        await client.send(ApiKey.API_VERSIONS, 3, body)
        assert await client.closed_by_server()


async def _raw_token(client, token: bytes) -> bytes:  # type: ignore[no-untyped-def]
    await client.send_frame(struct.pack(">i", len(token)) + token)
    return await client.recv_frame()


async def test_v0_handshake_takes_bare_tokens(tmp_path: Path) -> None:
    """After SaslHandshake v0 the PLAIN token travels without a Kafka header and is answered bare."""
    _add_user(tmp_path, "alice", "s3cret")
    async with running_app(tmp_path, listeners=SASL_AND_PLAIN) as (_, port), connected(port) as client:
        handshake = await client.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        assert handshake.error_code == ErrorCode.none
        assert await _raw_token(client, b"\x00alice\x00s3cret") == b""
        metadata = await client.call(ApiKey.METADATA, 1, {"topics": None})
        assert [b.port for b in metadata.brokers] == [port]


async def test_v0_wrong_password_closes_the_connection(tmp_path: Path) -> None:
    """With bare tokens the only failure signal is the close, after the delay."""
    _add_user(tmp_path, "alice", "s3cret")
    async with running_app(tmp_path, listeners=SASL_AND_PLAIN) as (_, port), connected(port) as client:
        await client.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        token = b"\x00alice\x00guess!"
        await client.send_frame(struct.pack(">i", len(token)) + token)
        assert await client.closed_by_server()


async def test_user_made_with_the_admin_api_can_log_in(tmp_path: Path) -> None:
    """AlterUserScramCredentials (client-salted password) makes a user who then logs in; Describe shows it."""
    salt, iterations = b"salt-for-bob-123", 4096
    salted = ScramMechanism.SCRAM_SHA_256.salted_password("hunter2", salt, iterations)
    async with running_app(tmp_path, listeners=SASL_AND_PLAIN) as (app, _):
        plain_port = app.listener.bound["PLAINTEXT"][1]
        sasl_port = app.listener.bound["SASL_PLAINTEXT"][1]
        async with connected(plain_port) as admin:
            upsert = {
                "name": "bob",
                "mechanism": 1,
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted,
            }
            altered = await admin.call(
                ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [upsert]}
            )
            assert [(r.user, r.error_code) for r in altered.results] == [("bob", ErrorCode.none)]
            described = await admin.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
            assert [
                (r.user, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in described.results
            ] == [("bob", [(1, 4096)])]
            missing = await admin.call(
                ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": "carol"}]}
            )
            assert missing.results[0].error_code == ErrorCode.resource_not_found
        async with connected(sasl_port) as client:
            _, final = await _scram_login(client, "sha256", "bob", "hunter2")
            assert final.error_code == ErrorCode.none
    assert b"hunter2" not in (tmp_path / "scram-credentials.json").read_bytes()


async def test_metadata_answers_the_advertised_address_of_the_clients_listener(tmp_path: Path) -> None:
    """Each listener advertises its own address: Metadata over PLAINTEXT and over INTERNAL differ."""
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "advertised.listeners": "PLAINTEXT://public.example:19092,INTERNAL://internal.example:29092",
    }
    async with running_app(tmp_path, **overrides) as (app, _):
        answers = {}
        for name, (_, port) in app.listener.bound.items():
            async with connected(port) as client:
                metadata = await client.call(
                    ApiKey.METADATA,
                    12,
                    {
                        "topics": None,
                        "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False,
                    },
                )
                coordinator = await client.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
                answers[name] = (
                    [(b.host, b.port) for b in metadata.brokers],
                    (coordinator.host, coordinator.port),
                )
    assert answers == {
        "PLAINTEXT": ([("public.example", 19092)], ("public.example", 19092)),
        "INTERNAL": ([("internal.example", 29092)], ("internal.example", 29092)),
    }


async def test_sasl_failure_delay_does_not_stall_other_clients(tmp_path: Path) -> None:
    """While a failed login waits out its delay, another connection is answered at once."""
    _add_user(tmp_path, "alice", "s3cret")
    overrides = {"listeners": SASL_AND_PLAIN, "connection.failed.authentication.delay.ms": "2000"}
    async with running_app(tmp_path, **overrides) as (app, port):
        bystander_port = app.listener.bound["PLAINTEXT"][1]
        async with connected(port) as failing, connected(bystander_port) as bystander:
            await failing.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            await failing.send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00guess"})
            await asyncio.sleep(0.05)
            started = time.monotonic()
            await bystander.call(
                ApiKey.METADATA,
                12,
                {
                    "topics": None,
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False,
                },
            )
            assert time.monotonic() - started < 1.5


def _server_first_parameters(server_first: bytes) -> tuple[bytes, int]:
    attributes = dict(part.split("=", 1) for part in server_first.decode().split(","))
    return base64.b64decode(attributes["s"]), int(attributes["i"])


async def _probe(port: int, mechanism: str, user: str) -> tuple[bytes, int]:
    """The salt and iteration count the server shows ``user`` in its server-first message."""
    async with connected(port) as client:
        await client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        scram = ScramClient({"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism], user, "x")
        first = await client.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.first()})
        assert first.error_code == ErrorCode.none
        return _server_first_parameters(bytes(first.auth_bytes))


async def test_an_unknown_user_looks_like_one_made_by_users_add(tmp_path: Path) -> None:
    """An unknown user's server-first message has the iteration count and salt length of a user made
    by ``kcoord users add``; its salt is the same at every probe and after a restart, differs per
    name and mechanism, and is not the hash of its name."""
    add_user(tmp_path, "alice", "s3cret")
    probes: dict[tuple[str, str], set[tuple[bytes, int]]] = {}
    for _restart in range(2):
        async with running_app(tmp_path, listeners=SASL_AND_PLAIN) as (_, port):
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                for user in ("alice", "mallory", "trent"):
                    for _probe_again in range(2):
                        found = await _probe(port, mechanism, user)
                        probes.setdefault((mechanism, user), set()).add(found)
    assert all(len(seen) == 1 for seen in probes.values()), "one salt per name, probes and restarts alike"
    shown = {key: next(iter(seen)) for key, seen in probes.items()}
    real_salt, real_iterations = shown[("SCRAM-SHA-512", "alice")]
    for (mechanism, user), (salt, iterations) in shown.items():
        assert (len(salt), iterations) == (len(real_salt), real_iterations), (mechanism, user)
    decoys = [salt for (_, user), (salt, _) in shown.items() if user != "alice"]
    assert len(set(decoys)) == len(decoys) == 4
    assert hashlib.sha256(b"kcoord-unknown-user:mallory").digest() not in decoys
    assert stat.S_IMODE((tmp_path / DECOY_KEY_FILE).stat().st_mode) == 0o600
