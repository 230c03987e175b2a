"""The ``kcoord`` client commands against a server whose only listener is secured, through
``--command-config`` (and ``KCOORD_CLIENT_*`` variables): SASL_SSL with SCRAM-SHA-512, and SSL with a
client certificate required (mTLS). Every command runs as a real ``kcoord`` subprocess, as an
operator types it; the server's authorizer is on, so the commands work because the principal they
log in as is a super user, and fail with Kafka's error when it is not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.secure_server import add_user
from tests.support.server import KcoordProcess
from tests.support.tls_certs import Pki, make_pki

pytestmark = pytest.mark.clients

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
APP, APP_PASSWORD = "app", "app-secret"
AUTHORIZER = "kcoord.security.StandardAuthorizer"
MESSAGES = ["first", "second", "third", "fourth"]


class OneListenerKcoord(KcoordProcess):
    """kcoord with one listener of the given security protocol on a free loopback port."""

    def __init__(self, data_dir: Path, protocol: str, settings: dict[str, str]) -> None:
        super().__init__(data_dir, settings)
        self.protocol = protocol

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--listen") + 1] = f"{self.protocol}://127.0.0.1:0"
        return cmd


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def sasl_ssl(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[OneListenerKcoord]:
    data_dir = tmp_path_factory.mktemp("sasl-ssl") / "data"
    add_user(data_dir, ADMIN, ADMIN_PASSWORD)
    settings = {
        "ssl.keystore.location": str(pki.server_keystore()),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{ADMIN}",
        "kcoord.metrics.ssl.enable": "true",
        "kcoord.metrics.auth.users": ADMIN,
    }
    server = OneListenerKcoord(data_dir, "SASL_SSL", settings).start()
    try:
        yield server
    finally:
        server.terminate()
    assert_no_errors(server)


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[OneListenerKcoord]:
    settings = {
        "ssl.keystore.location": str(pki.server_keystore()),
        "ssl.truststore.location": str(pki.ca_cert),
        "ssl.client.auth": "required",
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{pki.client_subject}",
    }
    server = OneListenerKcoord(tmp_path_factory.mktemp("mtls") / "data", "SSL", settings).start()
    try:
        yield server
    finally:
        server.terminate()
    assert_no_errors(server)


def assert_no_errors(server: KcoordProcess) -> None:
    """The refused logins and requests the tests make are warnings at most, never errors."""
    errors = [e for e in server.logs if e.get("level") in ("error", "critical")]
    assert not errors and not [line for line in server.raw_log if "Traceback" in line], errors


def write_properties(path: Path, properties: dict[str, str]) -> Path:
    path.write_text("".join(f"{name}={value}\n" for name, value in properties.items()))
    return path


def kcoord(
    server: KcoordProcess,
    *args: str,
    config: Path | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``kcoord ARGS --bootstrap SERVER [--command-config CONFIG]`` as a subprocess."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
    config_args = ["--command-config", str(config)] if config is not None else []
    return subprocess.run(
        [sys.executable, "-m", "kcoord", *args, "--bootstrap", server.bootstrap, *config_args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env={**clean, **(env or {})},
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    assert "Traceback" not in done.stderr
    return done.stdout


def committed_offsets(
    server: KcoordProcess, group: str, config: Path | None, env: dict[str, str]
) -> list[int]:
    described = json.loads(ok(kcoord(server, "groups", "describe", group, "--json", config=config, env=env)))
    return sorted(int(row["current_offset"]) for row in described["partitions"])


def every_command_works(
    server: KcoordProcess, config: Path | None, env: dict[str, str] | None = None
) -> None:
    """topics create, produce, consume --group, groups describe, groups reset-offsets --execute,
    acls add (and list), users add and list: each exits 0 and did what it says."""
    env = env or {}
    topic, group = f"secured-{uuid.uuid4().hex[:8]}", f"group-{uuid.uuid4().hex[:8]}"
    created = ok(kcoord(server, "topics", "create", topic, "--partitions", "2", config=config, env=env))
    assert f"Created topic {topic} with 2 partition(s)" in created
    ok(kcoord(server, "produce", topic, config=config, env=env, stdin="".join(f"{m}\n" for m in MESSAGES)))
    consumed = kcoord(
        server, "consume", topic, "--group", group, "--from-beginning", "--max-messages", str(len(MESSAGES)),
        config=config, env=env,
    )  # fmt: skip
    assert sorted(ok(consumed).splitlines()) == sorted(MESSAGES)
    counts = committed_offsets(server, group, config, env)
    assert sum(counts) == len(MESSAGES)
    described = ok(kcoord(server, "groups", "describe", group, config=config, env=env))
    assert topic in described
    reset = kcoord(
        server, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute",
        config=config, env=env,
    )  # fmt: skip
    assert f"Committed 2 offset(s) for group {group}" in ok(reset)
    assert committed_offsets(server, group, config, env) == [0, 0]
    ok(kcoord(server, "acls", "add", "--topic", topic, "--principal", f"User:{APP}", "--operation", "Read",
              config=config, env=env))  # fmt: skip
    listed = json.loads(
        ok(kcoord(server, "acls", "list", "--topic", topic, "--json", config=config, env=env))
    )
    assert [(a["principal"], a["operation"]) for a in listed] == [(f"User:{APP}", "READ")]
    added = kcoord(server, "users", "add", APP, "--password-stdin", "--mechanism", "SCRAM-SHA-512",
                   config=config, env=env, stdin=APP_PASSWORD + "\n")  # fmt: skip
    assert ok(added).strip() == f"{APP}: SCRAM-SHA-512"
    users = ok(kcoord(server, "users", "list", config=config, env=env)).splitlines()
    assert f"{APP}\tSCRAM-SHA-512 (8192)" in users


def sasl_properties(pki: Pki, user: str = ADMIN, password: str = ADMIN_PASSWORD) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(pki.ca_cert),
    }


def test_every_command_over_sasl_ssl_scram_sha_512(
    sasl_ssl: OneListenerKcoord, pki: Pki, tmp_path: Path
) -> None:
    """With a SCRAM-SHA-512 login over TLS from --command-config, every client command works."""
    config = write_properties(tmp_path / "admin.properties", sasl_properties(pki))
    every_command_works(sasl_ssl, config)


def test_every_command_over_mtls(mtls: OneListenerKcoord, pki: Pki, tmp_path: Path) -> None:
    """With a client certificate (librdkafka's ssl.certificate.location + ssl.key.location) on an SSL
    listener that requires one, every client command works as the certificate's principal."""
    config = write_properties(
        tmp_path / "mtls.properties",
        {
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca_cert),
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key),
        },
    )
    every_command_works(mtls, config)


def test_mtls_with_a_pem_keystore_and_without_a_certificate(
    mtls: OneListenerKcoord, pki: Pki, tmp_path: Path
) -> None:
    """ssl.keystore.location (key and chain in one PEM, as kcoord's server reads) is a client
    certificate too; without any, the server refuses the handshake and the command says so."""
    keystore = tmp_path / "client-keystore.pem"
    keystore.write_text(pki.client_key.read_text() + pki.client_cert.read_text())
    config = write_properties(
        tmp_path / "keystore.properties",
        {
            "security.protocol": "SSL",
            "ssl.truststore.location": str(pki.ca_cert),
            "ssl.keystore.location": str(keystore),
        },
    )
    ok(kcoord(mtls, "topics", "list", config=config))
    bare = write_properties(
        tmp_path / "bare.properties", {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_cert)}
    )
    refused = kcoord(mtls, "topics", "list", config=bare)
    assert refused.returncode == 1 and refused.stderr.startswith("kcoord: "), refused.stderr
    assert "Traceback" not in refused.stderr


def test_environment_variables_and_jaas_config(sasl_ssl: OneListenerKcoord, pki: Pki) -> None:
    """The same login from KCOORD_CLIENT_* variables alone, with Kafka's sasl.jaas.config
    ScramLoginModule line instead of sasl.username/sasl.password, is enough for every command."""
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN}" password="{ADMIN_PASSWORD}";'
    )
    env = {
        "KCOORD_CLIENT_SECURITY_PROTOCOL": "SASL_SSL",
        "KCOORD_CLIENT_SASL_MECHANISM": "SCRAM-SHA-512",
        "KCOORD_CLIENT_SASL_JAAS_CONFIG": jaas,
        "KCOORD_CLIENT_SSL_CA_LOCATION": str(pki.ca_cert),
    }
    every_command_works(sasl_ssl, None, env)


def test_plain_over_sasl_ssl_and_a_variable_overriding_the_file(
    sasl_ssl: OneListenerKcoord, pki: Pki, tmp_path: Path
) -> None:
    """PLAIN over TLS logs in; a KCOORD_CLIENT_ variable overrides the file's property (file < env)."""
    config = write_properties(
        tmp_path / "plain.properties",
        {**sasl_properties(pki, password="not-the-password"), "sasl.mechanism": "PLAIN"},
    )
    env = {"KCOORD_CLIENT_SASL_PASSWORD": ADMIN_PASSWORD}
    assert "__consumer_offsets" in ok(
        kcoord(sasl_ssl, "topics", "list", "--internal", config=config, env=env)
    )


def test_refusals_are_one_line_and_exit_1(sasl_ssl: OneListenerKcoord, pki: Pki, tmp_path: Path) -> None:
    """A wrong password, a user the authorizer does not allow, a mechanism the server does not offer
    and no security at all each end the command with one ``kcoord:`` line and exit 1 (no traceback,
    no hang); a bad property exits 2."""
    wrong = write_properties(tmp_path / "wrong.properties", sasl_properties(pki, password="wrong"))
    failed = kcoord(sasl_ssl, "topics", "list", config=wrong)
    assert failed.returncode == 1
    assert (
        failed.stderr.startswith("kcoord: SASL SCRAM-SHA-512 login to 127.0.0.1:")
        and "SASL_AUTHENTICATION_FAILED" in failed.stderr
    )
    ok(
        kcoord(
            sasl_ssl,
            "users",
            "add",
            "nobody",
            "--password-stdin",
            config=write_properties(tmp_path / "a.properties", sasl_properties(pki)),
            stdin="nobody-secret\n",
        )
    )
    nobody = write_properties(tmp_path / "nobody.properties", sasl_properties(pki, "nobody", "nobody-secret"))
    denied = kcoord(sasl_ssl, "topics", "create", f"denied-{uuid.uuid4().hex[:6]}", config=nobody)
    assert denied.returncode == 1 and "AUTHORIZATION_FAILED" in denied.stderr, denied.stderr
    sha256 = write_properties(
        tmp_path / "sha256.properties", {**sasl_properties(pki), "sasl.mechanism": "SCRAM-SHA-256"}
    )
    unoffered = kcoord(sasl_ssl, "topics", "list", config=sha256)
    assert unoffered.returncode == 1
    assert "UNSUPPORTED_SASL_MECHANISM (the server offers SCRAM-SHA-512, PLAIN)" in unoffered.stderr
    plain = kcoord(sasl_ssl, "topics", "list")
    assert plain.returncode == 1 and plain.stderr.startswith("kcoord: "), plain.stderr
    typo = write_properties(tmp_path / "typo.properties", {**sasl_properties(pki), "sasl.pasword": "x"})
    bad = kcoord(sasl_ssl, "topics", "list", config=typo)
    assert bad.returncode == 2
    assert (
        bad.stderr.strip()
        == "kcoord: client properties: sasl.pasword: not a client property kcoord's commands support; "
        "did you mean sasl.password?"
    )
    for done in (failed, denied, unoffered, plain, bad):
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_http_commands_use_https_and_basic_auth(
    sasl_ssl: OneListenerKcoord, pki: Pki, tmp_path: Path
) -> None:
    """``groups history`` and ``cluster status`` read the endpoint over https with the properties' CA,
    logging in with sasl.username/sasl.password as HTTP Basic; without them the endpoint says 401."""
    config = write_properties(tmp_path / "admin.properties", sasl_properties(pki))
    topic, group = f"history-{uuid.uuid4().hex[:8]}", f"history-group-{uuid.uuid4().hex[:8]}"
    ok(kcoord(sasl_ssl, "topics", "create", topic, "--partitions", "1", config=config))
    ok(kcoord(sasl_ssl, "consume", topic, "--group", group, "--idle-timeout-ms", "200", config=config))
    metrics = ["--metrics", str(sasl_ssl.metrics_address)]
    history = http_command("groups", "history", group, "--json", *metrics, config=config)
    assert json.loads(ok(history))[0]["trigger"]
    status = http_command("cluster", "status", *metrics, config=config)
    assert ok(status).strip() == "single node (kcoord.cluster.enable is off)"
    tls_only = write_properties(
        tmp_path / "tls.properties", {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_cert)}
    )
    refused = http_command("groups", "history", group, *metrics, config=tls_only)
    assert refused.returncode == 1 and "HTTP 401" in refused.stderr, refused.stderr


def http_command(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    """A command that reads the HTTP endpoint (``--metrics``), so without ``--bootstrap``."""
    return subprocess.run(
        [sys.executable, "-m", "kcoord", *args, "--command-config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")},
    )


def test_health_needs_only_tls_on_a_sasl_ssl_listener(sasl_ssl: OneListenerKcoord, pki: Pki) -> None:
    """``kcoord health`` with TLS from KCOORD_CLIENT_* variables answers ok on the SASL_SSL listener
    (ApiVersions precedes SASL, as in Kafka): the secure compose profile's healthcheck."""
    env = {"KCOORD_CLIENT_SECURITY_PROTOCOL": "SSL", "KCOORD_CLIENT_SSL_CA_LOCATION": str(pki.ca_cert)}
    assert ok(kcoord(sasl_ssl, "health", env=env)).strip() == "ok"
