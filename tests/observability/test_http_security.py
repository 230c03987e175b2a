"""The HTTP endpoint binds to loopback by default and can require TLS and a SCRAM user's password."""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kcoord.config import Settings
from kcoord.security.credentials import CredentialFile
from kcoord.security.scram import ScramCredential, ScramMechanism
from tests.protocol.in_process import running_app
from tests.support.secure_server import add_user
from tests.support.tls_certs import make_pki


def test_http_endpoint_binds_loopback_by_default() -> None:
    """Unless told otherwise, /metrics and /v1 listen on 127.0.0.1 only."""
    assert Settings.load(environ={})["kcoord.metrics.listen"] == ("127.0.0.1", 9644)


def _get(url: str, context: ssl.SSLContext | None, authorization: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_tls_and_basic_auth(tmp_path: Path) -> None:
    """TLS and auth users: no or wrong credentials get 401 (counted), alice's password gets the metrics."""
    pki = make_pki(tmp_path / "pki")
    data_dir = tmp_path / "data"
    CredentialFile(data_dir).write(
        {
            "alice": {
                ScramMechanism.SCRAM_SHA_512: ScramCredential.from_password(
                    ScramMechanism.SCRAM_SHA_512, "pw", 4096
                )
            },
            "bob": {
                ScramMechanism.SCRAM_SHA_512: ScramCredential.from_password(
                    ScramMechanism.SCRAM_SHA_512, "pw2", 4096
                )
            },
        }
    )
    overrides = {
        "kcoord.metrics.ssl.enable": "true",
        "ssl.keystore.location": str(pki.server_keystore()),
        "kcoord.metrics.auth.users": "alice",
    }
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    async with running_app(data_dir, **overrides) as (app, _):
        assert app.http.bound is not None
        url = f"https://localhost:{app.http.bound[1]}/metrics"
        assert (await asyncio.to_thread(_get, url, context))[0] == 401
        assert (await asyncio.to_thread(_get, url, context, _basic("alice", "wrong")))[0] == 401
        assert (await asyncio.to_thread(_get, url, context, _basic("bob", "pw2")))[0] == 401
        status, body = await asyncio.to_thread(_get, url, context, _basic("alice", "pw"))
        assert status == 200
        assert b'kcoord_authentication_failures_total{listener="http",mechanism="BASIC"} 3.0' in body
        groups = await asyncio.to_thread(
            _get, f"https://localhost:{app.http.bound[1]}/v1/groups", context, _basic("alice", "pw")
        )
        assert groups[0] == 200
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # clear HTTP on the TLS port
            await asyncio.to_thread(
                urllib.request.urlopen, f"http://127.0.0.1:{app.http.bound[1]}/metrics", timeout=5
            )


async def test_basic_auth_failures_are_delayed_and_a_changed_password_ends_the_old_one(
    tmp_path: Path,
) -> None:
    """A wrong password is answered 401 only after connection.failed.authentication.delay.ms; a
    header that passed stops passing once ``kcoord users add`` changes the password, and the new
    password passes."""
    data_dir = tmp_path / "data"
    add_user(data_dir, "alice", "old-pw")
    overrides = {"kcoord.metrics.auth.users": "alice", "connection.failed.authentication.delay.ms": "400"}
    async with running_app(data_dir, **overrides) as (app, _):
        assert app.http.bound is not None
        url = f"http://127.0.0.1:{app.http.bound[1]}/metrics"
        started = time.monotonic()
        assert (await asyncio.to_thread(_get, url, None, _basic("alice", "guess")))[0] == 401
        assert time.monotonic() - started >= 0.4
        assert (await asyncio.to_thread(_get, url, None, _basic("alice", "old-pw")))[0] == 200
        assert (await asyncio.to_thread(_get, url, None, _basic("alice", "old-pw")))[0] == 200
        await asyncio.to_thread(add_user, data_dir, "alice", "new-pw")
        assert (await asyncio.to_thread(_get, url, None, _basic("alice", "old-pw")))[0] == 401
        assert (await asyncio.to_thread(_get, url, None, _basic("alice", "new-pw")))[0] == 200
        labels = {"listener": "http", "mechanism": "BASIC"}
        assert app.metrics.registry.get_sample_value("kcoord_authentication_failures_total", labels) == 2
