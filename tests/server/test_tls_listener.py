"""TLS listeners in process: a client certificate becomes the connection's principal (mTLS)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from kcoord.security.principal import ANONYMOUS, KafkaPrincipal
from tests.protocol.in_process import AsyncRawClient, running_app
from tests.support.tls_certs import make_pki


async def _principals_after_api_versions(
    tmp_path: Path, client_auth: str, with_certificate: bool
) -> list[str]:
    pki = make_pki(tmp_path / "pki")
    overrides = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki.server_keystore()),
        "ssl.truststore.location": str(pki.ca_cert),
        "ssl.client.auth": client_auth,
    }
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    if with_certificate:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    async with running_app(tmp_path / "data", **overrides) as (app, port):
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname="localhost"
        )
        client = AsyncRawClient(reader, writer, "tls-test")
        try:
            answer = await client.call(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            )
            assert answer.error_code == ErrorCode.none
            [listener] = app.listener.listeners
            return [str(c.info.principal) for c in listener._connections.values()]
        finally:
            await client.close()


async def test_client_certificate_subject_is_the_principal(tmp_path: Path) -> None:
    """With ssl.client.auth=required the principal is User: plus the subject, most specific first."""
    principals = await _principals_after_api_versions(tmp_path, "required", with_certificate=True)
    assert principals == [str(KafkaPrincipal.user("CN=alice,OU=eng,O=kcoord"))]


async def test_requested_without_certificate_stays_anonymous(tmp_path: Path) -> None:
    """With ssl.client.auth=requested a client without a certificate is served as User:ANONYMOUS."""
    principals = await _principals_after_api_versions(tmp_path, "requested", with_certificate=False)
    assert principals == [str(ANONYMOUS)]
