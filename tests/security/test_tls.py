"""Certificate subjects as Kafka's default principal builder writes them, and TLS settings checks."""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path

import pytest

from kcoord.config import Settings
from kcoord.security.tls import TlsConfigError, certificate_principal, server_context, subject_name
from tests.support.tls_certs import make_pki


def test_subject_is_written_most_specific_first() -> None:
    """ssl lists the subject from C down to CN; RFC 2253 (and Kafka) writes it from CN up."""
    peercert = {
        "subject": (
            (("countryName", "DE"),),
            (("organizationName", "Example, Inc."),),
            (("organizationalUnitName", "eng"),),
            (("commonName", "alice"),),
        )
    }
    assert subject_name(peercert) == "CN=alice,OU=eng,O=Example\\, Inc.,C=DE"
    assert str(certificate_principal(peercert)) == "User:CN=alice,OU=eng,O=Example\\, Inc.,C=DE"


def test_no_certificate_no_principal() -> None:
    """Without a verified client certificate the connection keeps its anonymous principal."""
    assert certificate_principal(None) is None
    assert certificate_principal({}) is None


def _settings(**flags: str) -> Settings:
    return Settings.load(environ={}, flags=flags)


def _served_subject(server: ssl.SSLContext, ca_file: Path) -> str:
    """The certificate subject a client trusting ``ca_file`` sees in a handshake with ``server``
    (in memory, no socket)."""
    client = ssl.create_default_context(cafile=str(ca_file))
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server_side = server.wrap_bio(server_in, server_out, server_side=True)
    client_side = client.wrap_bio(client_in, client_out, server_hostname="localhost")
    done: set[int] = set()
    for _ in range(10):
        for side, outgoing, peer_incoming in (
            (client_side, client_out, server_in),
            (server_side, server_out, client_in),
        ):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
                done.add(id(side))
            peer_incoming.write(outgoing.read())
        if len(done) == 2:
            return subject_name(client_side.getpeercert())
    raise AssertionError("the in-memory handshake did not finish")


def test_keystore_as_file_or_as_pem_text(tmp_path: Path) -> None:
    """The key and chain load from ssl.keystore.location or from the PEM text settings: a client
    trusting the CA completes a handshake and sees the server's certificate either way, and the
    truststore setting turns on client authentication."""
    pki = make_pki(tmp_path)
    from_file = server_context(_settings(**{"ssl.keystore.location": str(pki.server_keystore())}))
    assert _served_subject(from_file, pki.ca_cert) == "CN=localhost"
    assert from_file.verify_mode == ssl.CERT_NONE
    from_text = server_context(
        _settings(
            **{
                "ssl.keystore.certificate.chain": pki.server_cert.read_text(),
                "ssl.keystore.key": pki.server_key.read_text(),
                "ssl.truststore.certificates": pki.ca_cert.read_text(),
                "ssl.client.auth": "required",
            }
        )
    )
    assert from_text.verify_mode == ssl.CERT_REQUIRED
    assert [cert["subject"] for cert in from_text.get_ca_certs()] == [((("commonName", "kcoord test CA"),),)]


def test_missing_settings_are_named(tmp_path: Path) -> None:
    """No keystore, or client auth without a truststore, is refused with the setting's name."""
    with pytest.raises(TlsConfigError, match=r"ssl\.keystore"):
        server_context(_settings())
    pki = make_pki(tmp_path)
    with pytest.raises(TlsConfigError, match="truststore"):
        server_context(
            _settings(**{"ssl.keystore.location": str(pki.server_keystore()), "ssl.client.auth": "requested"})
        )
