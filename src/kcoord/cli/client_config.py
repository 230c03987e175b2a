"""Client security for the ``kcoord`` commands that connect to a server, from Kafka client properties.

``--command-config FILE`` takes a properties file as Kafka's tools do (``key=value`` lines, ``#``
comments, ``\\`` continuations). Every property can also come from the environment, for
containers: ``KCOORD_CLIENT_`` and the name in capitals with ``_`` for ``.``
(``KCOORD_CLIENT_SASL_PASSWORD`` is ``sasl.password``), and ``KCOORD_CLIENT_CONFIG`` names the file
when the flag is absent. Every client variable starts with ``KCOORD_CLIENT_``, a prefix no server
setting has, so a server's container can carry them for its healthcheck. A variable overrides the
file's property, as kcoord's own settings layer (file < environment < flags).

Understood:

- ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL;
- ``sasl.mechanism``: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with ``sasl.username`` +
  ``sasl.password`` (librdkafka's names) or ``sasl.jaas.config`` (Kafka's ``ScramLoginModule`` or
  ``PlainLoginModule`` line);
- the CA: ``ssl.ca.location`` or ``ssl.truststore.location`` (PEM; the system's CAs when neither);
- a client certificate for mTLS: ``ssl.certificate.location`` + ``ssl.key.location``, or
  ``ssl.keystore.location`` (one PEM file with key and chain, as kcoord's server reads it), with
  ``ssl.key.password`` when the key is encrypted;
- ``ssl.endpoint.identification.algorithm``: ``https`` (default) checks the server's name, empty
  (or ``none``) does not.

Other client properties (``client.id``, timeouts, ...) are ignored with a warning, as Kafka's tools
warn of unused ones; an unknown ``ssl.``/``sasl.``/``security.`` property is an error rather than a
setting silently not applied.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import ssl
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "COMMAND_CONFIG_ENV",
    "ENV_PREFIX",
    "PLAINTEXT",
    "ClientConfigError",
    "ClientSecurity",
    "add_command_config_argument",
    "client_security",
    "env_name",
    "load_client_security",
    "parse_jaas_config",
    "parse_properties",
]

ENV_PREFIX = "KCOORD_CLIENT_"
COMMAND_CONFIG_ENV = "KCOORD_CLIENT_CONFIG"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PROPERTIES = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "ssl.ca.location",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm",
)
_SECURITY_PREFIXES = ("ssl.", "sasl.", "security.")
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
}


class ClientConfigError(ValueError):
    """The client properties are incomplete or contradictory; the message names the property."""


def env_name(prop: str) -> str:
    """``sasl.password`` -> ``KCOORD_CLIENT_SASL_PASSWORD``."""
    return ENV_PREFIX + prop.upper().replace(".", "_")


_ENV_TO_PROPERTY = {env_name(p): p for p in PROPERTIES}


@dataclass(frozen=True)
class ClientSecurity:
    """How to connect: TLS (with its context) and SASL (mechanism and credentials), or neither."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT = ClientSecurity()


def _unescape(text: str) -> str:
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(escapes.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> list[str]:
    """Physical lines joined where one ends in an odd number of backslashes (leading blanks dropped)."""
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip() if pending is not None else raw
        if pending is None and (not line.strip() or line.lstrip().startswith(("#", "!"))):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending = (pending or "") + line[:-1]
            continue
        lines.append((pending or "") + line)
        pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties document: ``key=value``, ``key: value`` or ``key value`` per logical line."""
    properties: dict[str, str] = {}
    for line in _logical_lines(text):
        line = line.lstrip()
        match = re.match(r"((?:[^\\=:\s]|\\.)*)\s*[=:]?\s*(.*)$", line, re.DOTALL)
        assert match is not None  # the pattern matches any line
        properties[_unescape(match.group(1))] = _unescape(match.group(2))
    return properties


_JAAS = re.compile(r"\s*(\S+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", re.DOTALL)
_JAAS_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)')


def parse_jaas_config(text: str) -> tuple[str, dict[str, str]]:
    """``Module required username="u" password="p";`` -> (module, options), as Kafka's JaasConfig."""
    match = _JAAS.fullmatch(text)
    if match is None:
        raise ClientConfigError("sasl.jaas.config: expected 'LoginModule required key=\"value\" ...;'")
    module, rest = match.group(1), match.group(3)
    options: dict[str, str] = {}
    position = 0
    while rest[position:].strip():
        option = _JAAS_OPTION.match(rest, position)
        if option is None:
            raise ClientConfigError(f"sasl.jaas.config: cannot read the options at {rest[position:][:20]!r}")
        value = option.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[option.group(1)] = value
        position = option.end()
    return module, options


def _read_file(path: str) -> dict[str, str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientConfigError(f"--command-config {path}: {exc}") from exc
    return parse_properties(text)


def _from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX) or key == COMMAND_CONFIG_ENV:
            continue
        prop = _ENV_TO_PROPERTY.get(key)
        if prop is None:
            close = difflib.get_close_matches(key, _ENV_TO_PROPERTY, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ClientConfigError(f"{key}: no such client property{hint}")
        found[prop] = value
    return found


def _check_names(properties: Mapping[str, str], warn: Callable[[str], None]) -> None:
    for name in properties:
        if name in PROPERTIES:
            continue
        if name.startswith(_SECURITY_PREFIXES):
            close = difflib.get_close_matches(name, PROPERTIES, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ClientConfigError(f"{name}: not a client property kcoord's commands support{hint}")
        warn(f"{name} is not used by kcoord's commands; ignored")


def _credentials(properties: Mapping[str, str], mechanism: str) -> tuple[str, str]:
    username, password = properties.get("sasl.username"), properties.get("sasl.password")
    jaas = properties.get("sasl.jaas.config")
    if jaas:
        module, options = parse_jaas_config(jaas)
        allowed = _LOGIN_MODULES.get(module)
        if allowed is None:
            raise ClientConfigError(
                f"sasl.jaas.config: login module {module} is not supported "
                "(ScramLoginModule or PlainLoginModule)"
            )
        if mechanism not in allowed:
            raise ClientConfigError(
                f"sasl.jaas.config: {module.rpartition('.')[2]} cannot log in with {mechanism}"
            )
        username = options.get("username", username)
        password = options.get("password", password)
    if not username or password is None:
        raise ClientConfigError(
            f"SASL {mechanism} needs sasl.username and sasl.password (or sasl.jaas.config with both)"
        )
    return username, password


def _pem_only(properties: Mapping[str, str], name: str) -> None:
    kind = properties.get(name, "PEM").upper()
    if kind != "PEM":
        raise ClientConfigError(f"{name}={kind}: only PEM files are supported")


def _ssl_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    """A client context: the CA (or the system's), the hostname check, and a client certificate."""
    _pem_only(properties, "ssl.truststore.type")
    _pem_only(properties, "ssl.keystore.type")
    ca_file = properties.get("ssl.ca.location") or properties.get("ssl.truststore.location") or None
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ClientConfigError(f"ssl.ca.location {ca_file}: cannot load the CA certificates: {exc}") from exc
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    algorithm = properties.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", "", "none"):
        raise ClientConfigError(f"ssl.endpoint.identification.algorithm={algorithm}: expected https or empty")
    context.check_hostname = algorithm == "https"
    password = properties.get("ssl.key.password") or properties.get("ssl.keystore.password") or None
    keystore = properties.get("ssl.keystore.location")
    certificate, key = properties.get("ssl.certificate.location"), properties.get("ssl.key.location")
    if keystore and certificate:
        raise ClientConfigError("give ssl.keystore.location or ssl.certificate.location, not both")
    if bool(certificate) != bool(key):
        raise ClientConfigError("ssl.certificate.location and ssl.key.location go together")
    try:
        if keystore:
            context.load_cert_chain(keystore, password=password)
        elif certificate:
            context.load_cert_chain(certificate, key, password=password)
    except (OSError, ssl.SSLError) as exc:
        name = "ssl.keystore.location" if keystore else "ssl.certificate.location"
        raise ClientConfigError(f"{name}: cannot load the client key and certificate: {exc}") from exc
    return context


def security_from_properties(properties: Mapping[str, str]) -> ClientSecurity:
    """The connection security the properties describe; raises ClientConfigError naming what is wrong."""
    protocol = properties.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ClientConfigError(f"security.protocol={protocol}: expected one of {', '.join(PROTOCOLS)}")
    security = ClientSecurity(protocol=protocol)
    mechanism = properties.get("sasl.mechanism") or properties.get("sasl.mechanisms")
    if security.sasl:
        if not mechanism:
            raise ClientConfigError(
                f"security.protocol={protocol} needs sasl.mechanism ({', '.join(MECHANISMS)})"
            )
        mechanism = mechanism.strip().upper()
        if mechanism not in MECHANISMS:
            raise ClientConfigError(f"sasl.mechanism={mechanism}: expected one of {', '.join(MECHANISMS)}")
        username, password = _credentials(properties, mechanism)
        security = ClientSecurity(protocol, mechanism, username, password)
    if security.tls:
        security = ClientSecurity(
            protocol, security.mechanism, security.username, security.password, _ssl_context(properties)
        )
    return security


def load_client_security(
    command_config: str | None,
    environ: Mapping[str, str],
    warn: Callable[[str], None],
) -> ClientSecurity:
    """``--command-config`` (or ``KCOORD_CLIENT_CONFIG``) overlaid with ``KCOORD_CLIENT_*`` variables."""
    path = command_config or environ.get(COMMAND_CONFIG_ENV) or None
    properties = _read_file(path) if path else {}
    _check_names(properties, warn)
    properties.update(_from_environment(environ))
    return security_from_properties(properties)


def add_command_config_argument(parser: argparse.ArgumentParser) -> None:
    """``--command-config FILE`` on a command that connects to a server."""
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help=f"Kafka client properties (security.protocol, sasl.*, ssl.*); also {COMMAND_CONFIG_ENV} "
        f"and {ENV_PREFIX}* variables",
    )


def client_security(args: argparse.Namespace) -> ClientSecurity:
    """The security the command's ``--command-config`` and the environment ask for."""

    def warn(message: str) -> None:
        print(f"kcoord: warning: {message}", file=sys.stderr)

    return load_client_security(getattr(args, "command_config", None), os.environ, warn)
