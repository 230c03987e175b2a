"""Certificate subjects as Kafka's default principal builder writes them, and TLS settings checks."""

from __future__ import annotations

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


def test_keystore_as_file_or_as_pem_text(tmp_path: Path) -> None:
    """The key and chain load from ssl.keystore.location or from the PEM text settings."""
    pki = make_pki(tmp_path)
    server_context(_settings(**{"ssl.keystore.location": str(pki.server_keystore())}))
    server_context(
        _settings(
            **{
                "ssl.keystore.certificate.chain": pki.server_cert.read_text(),
                "ssl.keystore.key": pki.server_key.read_text(),
                "ssl.truststore.certificates": pki.ca_cert.read_text(),
                "ssl.client.auth": "required",
            }
        )
    )


def test_missing_settings_are_named(tmp_path: Path) -> None:
    """No keystore, or client auth without a truststore, is refused with the setting's name."""
    with pytest.raises(TlsConfigError, match=r"ssl\.keystore"):
        server_context(_settings())
    pki = make_pki(tmp_path)
    with pytest.raises(TlsConfigError, match="truststore"):
        server_context(
            _settings(**{"ssl.keystore.location": str(pki.server_keystore()), "ssl.client.auth": "requested"})
        )
