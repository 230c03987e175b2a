"""TLS for SSL and SASL_SSL listeners, from PEM with Kafka's setting names, and the client's principal.

Key and chain come from ``ssl.keystore.location`` (one PEM file holding both) or from the PEM
text of ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``; trusted CAs from
``ssl.truststore.location`` or the text of ``ssl.truststore.certificates``. ``ssl.client.auth``
``requested`` asks for a client certificate and ``required`` refuses a client without one (mTLS).

A verified client certificate names the principal as Kafka's default principal builder does:
``User:`` followed by the subject in RFC 2253 form, e.g. ``User:CN=alice,OU=eng,O=example``.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

from kcoord.config import Settings
from kcoord.security.principal import KafkaPrincipal

_VERIFY_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """The TLS settings are incomplete or their files do not load; the message names the setting."""


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """``ssl`` loads keys only from files: PEM text goes to a private temporary file, removed at once."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text)
        yield path
    finally:
        os.unlink(path)


def server_context(settings: Settings, *, with_client_auth: bool = True) -> ssl.SSLContext:
    """An SSLContext for a TLS listener; raises TlsConfigError naming what is missing or broken.

    ``with_client_auth=False`` asks for no client certificate whatever ``ssl.client.auth`` says: on
    a SASL_SSL listener clients prove who they are with SASL (Kafka applies ``ssl.client.auth``
    there only when set per listener, KIP-684, which kcoord does not offer), and the HTTP endpoint
    uses Basic credentials. Blocking file reads: called once while the app is built.
    """
    if settings["ssl.keystore.type"] != "PEM" or settings["ssl.truststore.type"] != "PEM":
        raise TlsConfigError("ssl.keystore.type and ssl.truststore.type: only PEM is supported")
    if settings["ssl.principal.mapping.rules"] != "DEFAULT":
        raise TlsConfigError("ssl.principal.mapping.rules: only DEFAULT (the whole subject) is supported")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    password = settings["ssl.key.password"] or None
    location = settings["ssl.keystore.location"]
    chain, key = settings["ssl.keystore.certificate.chain"], settings["ssl.keystore.key"]
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif chain and key:
            with _pem_file(chain) as chain_path, _pem_file(key) as key_path:
                context.load_cert_chain(chain_path, key_path, password=password)
        else:
            raise TlsConfigError(
                "a TLS listener needs ssl.keystore.location or "
                "ssl.keystore.certificate.chain and ssl.keystore.key"
            )
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.keystore: cannot load the key and certificate chain: {exc}") from exc
    client_auth = settings["ssl.client.auth"] if with_client_auth else "none"
    try:
        if settings["ssl.truststore.location"]:
            context.load_verify_locations(cafile=settings["ssl.truststore.location"])
        elif settings["ssl.truststore.certificates"]:
            context.load_verify_locations(cadata=settings["ssl.truststore.certificates"])
        elif client_auth != "none":
            raise TlsConfigError(f"ssl.client.auth={client_auth} needs a truststore to verify clients")
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.truststore: cannot load the CA certificates: {exc}") from exc
    context.verify_mode = _VERIFY_MODES[client_auth]
    return context


_ATTRIBUTE_KEYWORDS = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
"""The keywords RFC 2253 (and so Java's X500Principal) writes by name; others keep ssl's long name."""


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_name(peercert: Mapping[str, Any]) -> str:
    """The certificate subject in RFC 2253 order (most specific first): ``CN=alice,OU=eng,O=example``."""
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        rdns.append("+".join(f"{_ATTRIBUTE_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def certificate_principal(peercert: Mapping[str, Any] | None) -> KafkaPrincipal | None:
    """The principal of a verified client certificate (``ssl.principal.mapping.rules=DEFAULT``)."""
    if not peercert or not peercert.get("subject"):
        return None
    return KafkaPrincipal.user(subject_name(peercert))
