"""Client properties for ``--command-config`` and ``KCOORD_CLIENT_*``, and the command line's SCRAM
login checked against kcoord's SCRAM server (pure logic; the wire is in test_command_config)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from kcoord.cli.client_config import (
    ClientConfigError,
    ClientSecurity,
    env_name,
    load_client_security,
    parse_jaas_config,
    parse_properties,
)
from kcoord.cli.sasl_login import SaslLoginError, ScramLogin, plain_token
from kcoord.security.scram import ScramCredential, ScramMechanism, ScramServer

SHA512 = ScramMechanism.SCRAM_SHA_512


def _load(
    text: str | None, env: dict[str, str] | None = None, tmp_path: Path | None = None
) -> tuple[ClientSecurity, list[str]]:
    warnings: list[str] = []
    path = None
    if text is not None:
        assert tmp_path is not None
        path = tmp_path / "client.properties"
        path.write_text(text)
    return load_client_security(None if path is None else str(path), env or {}, warnings.append), warnings


def test_properties_follow_java_syntax() -> None:
    """Comments, ``=``/``:``/blank separators, backslash continuations and escapes read as Java reads them."""
    text = (
        "# a comment\n"
        "! another\n"
        "security.protocol = SASL_SSL\n"
        "sasl.mechanism:SCRAM-SHA-512\n"
        "sasl.username alice\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" \\\n'
        '    password="p\\\\w";\n'
        "odd\\=key=v\\u0041\n"
    )
    assert parse_properties(text) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="p\\w";',
        "odd=key": "vA",
    }


def test_jaas_config_of_both_login_modules() -> None:
    """Kafka's ScramLoginModule and PlainLoginModule lines give their options; quotes may hold escapes."""
    module, options = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="a\\"b c";'
    )
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert options == {"username": "bob", "password": 'a"b c'}
    with pytest.raises(ClientConfigError, match=r"sasl\.jaas\.config"):
        parse_jaas_config("username=bob")


def test_environment_names_and_precedence(tmp_path: Path) -> None:
    """``KCOORD_CLIENT_SASL_PASSWORD`` is ``sasl.password`` and overrides the file's value."""
    assert env_name("ssl.ca.location") == "KCOORD_CLIENT_SSL_CA_LOCATION"
    security, warnings = _load(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\nsasl.password=file\n"
        "client.id=tool\n",
        {"KCOORD_CLIENT_SASL_PASSWORD": "env", "UNRELATED": "x"},
        tmp_path,
    )
    assert (security.protocol, security.mechanism, security.username, security.password) == (
        "SASL_PLAINTEXT",
        "PLAIN",
        "a",
        "env",
    )
    assert warnings == ["client.id is not used by kcoord's commands; ignored"]
    assert "env" not in repr(security)


def test_the_file_can_come_from_kcoord_command_config(tmp_path: Path) -> None:
    """Without ``--command-config``, ``KCOORD_CLIENT_CONFIG`` names the file."""
    path = tmp_path / "c.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=u\nsasl.password=p\n"
    )
    security = load_client_security(None, {"KCOORD_CLIENT_CONFIG": str(path)}, print)
    assert (security.protocol, security.mechanism) == ("SASL_PLAINTEXT", "SCRAM-SHA-256")
    assert not security.tls and security.sasl and security.ssl_context is None


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("security.protocol=SASL_TLS\n", {}, "security.protocol=SASL_TLS: expected one of"),
        ("security.protocol=SASL_PLAINTEXT\n", {}, "needs sasl.mechanism"),
        ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n", {}, "sasl.mechanism=GSSAPI"),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\n",
            {},
            "needs sasl.username",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";\n',
            {},
            "ScramLoginModule cannot log in with PLAIN",
        ),
        ("ssl.cipher.suites=X\n", {}, "ssl.cipher.suites: not a client property"),
        ("security.protocol=SSL\nssl.truststore.type=JKS\n", {}, "only PEM"),
        ("security.protocol=SSL\nssl.ca.location=/nonexistent/ca.pem\n", {}, "ssl.ca.location /nonexistent"),
        ("security.protocol=SSL\nssl.certificate.location=/x.pem\n", {}, "go together"),
        ("", {"KCOORD_CLIENT_SASL_PASWORD": "x"}, "did you mean KCOORD_CLIENT_SASL_PASSWORD"),
    ],
)
def test_incomplete_or_wrong_properties_are_named(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    """Each mistake is a ClientConfigError naming the property, not a connection that fails later."""
    with pytest.raises(ClientConfigError, match=re.escape(message)):
        _load(text, env, tmp_path)


def test_no_properties_is_plaintext() -> None:
    """No file and no variables: PLAINTEXT, as Kafka's default."""
    security = load_client_security(None, {}, print)
    assert security.protocol == "PLAINTEXT" and not security.tls and not security.sasl


def _server(password: str = "pencil", iterations: int = 4096) -> ScramServer:
    credential = ScramCredential.from_password(SHA512, password, iterations)
    return ScramServer(SHA512, lambda user, mechanism: credential if user == "user,=x" else None)


def test_scram_login_against_kcoords_server() -> None:
    """The client's proof convinces kcoord's SCRAM server and the server's signature convinces the client
    (a user name with ``,`` and ``=`` is escaped as RFC 5802 says)."""
    server = _server()
    login = ScramLogin(SHA512, "user,=x", "pencil")
    server_first = server.evaluate(login.first())
    server_final = server.evaluate(login.final(server_first))
    login.verify(server_final)
    assert server.complete and server.username == "user,=x"


def test_scram_login_refuses_a_server_without_the_users_keys() -> None:
    """A server that answers the proof with a signature from other keys is not believed."""
    server = _server()
    login = ScramLogin(SHA512, "user,=x", "pencil")
    login.final(server.evaluate(login.first()))
    forged = base64.b64encode(b"\0" * 64).decode()
    with pytest.raises(SaslLoginError, match="signature does not match"):
        login.verify(f"v={forged}".encode())


@pytest.mark.parametrize(
    ("server_first", "message"),
    [
        ("r=other,s=c2FsdA==,i=4096", "nonce"),
        ("r={nonce}more,s=c2FsdA==,i=1000", "1000 iterations"),
        ("r={nonce}more,s=!!,i=4096", "malformed"),
        ("e=unknown-user", "refused the login: unknown-user"),
    ],
)
def test_scram_login_refuses_bad_server_first_messages(server_first: str, message: str) -> None:
    """A nonce that does not extend the client's, too few iterations, a bad salt or an ``e=`` fail."""
    login = ScramLogin(SHA512, "u", "p")
    nonce = login.first().decode().rpartition("r=")[2]
    with pytest.raises(SaslLoginError, match=message):
        login.final(server_first.format(nonce=nonce).encode())


def test_plain_token() -> None:
    """PLAIN sends an empty authzid, the user and the password, NUL-separated."""
    assert plain_token("alice", "s3cret") == b"\0alice\0s3cret"
