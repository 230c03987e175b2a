"""``sasl.server.max.receive.size`` over real sockets: large frames before SASL authentication close."""

from __future__ import annotations

import struct
from pathlib import Path

from kio.schema.errors import ErrorCode

from kcoord.app import App
from kcoord.protocol.api_keys import ApiKey
from kcoord.security.credentials import CredentialFile
from kcoord.security.scram import ScramCredential, ScramMechanism
from tests.protocol.in_process import connected, encode_request, running_app
from tests.support.scram_client import ScramClient

SASL_AND_PLAIN = "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"
LIMIT = "sasl.server.max.receive.size"
ABOVE_DEFAULT = 524288 + 1


def _limit_events(app: App) -> float:
    value = app.metrics.registry.get_sample_value("kcoord_limit_events_total", {"limit": LIMIT})
    return 0.0 if value is None else value


def _padded_api_versions(correlation_id: int, size: int) -> bytes:
    """A valid ApiVersions v0 request whose frame body is ``size`` bytes (trailing bytes are ignored)."""
    frame = encode_request(ApiKey.API_VERSIONS, 0, {}, correlation_id, "big")
    body = frame[4:] + bytes(size - len(frame) + 4)
    return struct.pack(">i", len(body)) + body


def _add_user(data_dir: Path, user: str, password: str) -> None:
    users = CredentialFile(data_dir).read()
    users[user] = {m: ScramCredential.from_password(m, password, 4096) for m in ScramMechanism}
    CredentialFile(data_dir).write(users)


async def test_large_frame_before_authentication_closes_without_reading_it(tmp_path: Path) -> None:
    """A declared size above the default 512 KiB closes the SASL connection at once and is counted;
    the same frame on the PLAINTEXT listener of the node is answered."""
    async with running_app(tmp_path, listeners=SASL_AND_PLAIN) as (app, sasl_port):
        async with connected(sasl_port) as stranger:
            await stranger.send_frame(struct.pack(">i", ABOVE_DEFAULT) + b"\x00" * 16)
            assert await stranger.closed_by_server()
        assert _limit_events(app) == 1
        async with connected(sasl_port) as small:
            versions = await small.call(ApiKey.API_VERSIONS, 0, {})
            assert versions.error_code == ErrorCode.none
        plain_port = app.listener.bound["PLAINTEXT"][1]
        async with connected(plain_port) as plain:
            await plain.send_frame(_padded_api_versions(7, ABOVE_DEFAULT))
            answer = await plain.recv(ApiKey.API_VERSIONS, 0, 7)
            assert answer.error_code == ErrorCode.none
        assert _limit_events(app) == 1


async def test_authenticated_connection_may_send_large_frames(tmp_path: Path) -> None:
    """Once SCRAM succeeded, frames up to socket.request.max.bytes are read again."""
    _add_user(tmp_path, "alice", "s3cret")
    overrides = {"listeners": SASL_AND_PLAIN, LIMIT: "4096"}
    async with running_app(tmp_path, **overrides) as (app, sasl_port), connected(sasl_port) as client:
        handshake = await client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
        assert handshake.error_code == ErrorCode.none
        scram = ScramClient("sha512", "alice", "s3cret")
        first = await client.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.first()})
        final = await client.call(
            ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.final(bytes(first.auth_bytes))}
        )
        assert final.error_code == ErrorCode.none
        await client.send_frame(_padded_api_versions(42, 100_000))
        answer = await client.recv(ApiKey.API_VERSIONS, 0, 42)
        assert answer.error_code == ErrorCode.none
        assert _limit_events(app) == 0
