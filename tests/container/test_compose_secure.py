"""The compose ``secure`` profile: it validates, its files are readable only by the user that reads them,
each service mounts only what it needs, the authorizer is on with one super user, and the whole profile,
run here without Docker (each service's commands with its mounts mapped to local directories), gives
``app`` what it needs and nothing more while Prometheus scrapes over TLS with Basic auth."""

from __future__ import annotations

import json
import os
import re
import ssl
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kcoord.config import DEFINITIONS, env_name
from tests.container.files import (
    DEPLOY,
    compose_config,
    dockerfile_final_stage,
    effective_settings,
    load_yaml,
    port_of,
)
from tests.observability.test_prometheus_and_late_member import launch_prometheus, query
from tests.support.server import KcoordProcess

SETUP = DEPLOY / "secure" / "setup.sh"
INSTALL = DEPLOY / "secure" / "install-secrets.sh"
GENERATED = DEPLOY / "secure" / "generated"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus-secure.yml"
SECURE_SERVICES = {"kcoord-secrets", "kcoord-users", "kcoord-secure", "kcoord-acls", "prometheus-secure"}
KCOORD_UID, PROMETHEUS_UID = 10001, 65534
PRIVATE, PUBLIC = 0o600, 0o644
SETTING_BY_ENV = {env_name(d.name): d.name for d in DEFINITIONS}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return compose_config("secure")


def _service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    service: dict[str, Any] = compose["services"][name]
    return service


def _secure_settings(compose: dict[str, Any]) -> dict[str, str]:
    service = _service(compose, "kcoord-secure")
    assert service["command"][:2] == ["kcoord", "serve"]
    return effective_settings(dict(service["environment"]), service["command"][2:])


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> host path (bind) or ``volume:NAME``."""
    return {
        v["target"]: v["source"] if v["type"] == "bind" else f"volume:{v['source']}"
        for v in service["volumes"]
    }


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _listing(directory: Path) -> dict[str, tuple[int, int]]:
    """name -> (owner uid, mode) of each file in ``directory``."""
    return {p.name: (p.stat().st_uid, _mode(p)) for p in sorted(directory.iterdir())}


def test_secure_profile_validates_and_leaves_the_default_services(compose: dict[str, Any]) -> None:
    """``docker compose --profile secure config`` is valid; without the profile the three services stay."""
    assert set(compose["services"]) == {"kcoord", "prometheus", "grafana"} | SECURE_SERVICES
    assert set(compose_config()["services"]) == {"kcoord", "prometheus", "grafana"}


def test_setup_leaves_keys_and_passwords_to_its_user_only(tmp_path: Path) -> None:
    """setup.sh's directory is 0700; the TLS key, every password and the client properties are 0600,
    only the CA certificate is world-readable, and the CA's key is gone."""
    out = tmp_path / "generated"
    subprocess.run(["sh", str(SETUP), str(out)], check=True, capture_output=True, timeout=120)
    assert _mode(out) == 0o700
    me = os.getuid()
    assert _listing(out) == {
        "admin.password": (me, PRIVATE),
        "admin.properties": (me, PRIVATE),
        "app.password": (me, PRIVATE),
        "app.properties": (me, PRIVATE),
        "ca.pem": (me, PUBLIC),
        "prometheus.password": (me, PRIVATE),
        "server.pem": (me, PRIVATE),
    }
    assert "PRIVATE KEY" in (out / "server.pem").read_text()
    app = dict(line.split("=", 1) for line in (out / "app.properties").read_text().splitlines())
    assert app["sasl.password"] == (out / "app.password").read_text()
    assert app["ssl.ca.location"] == str(out / "ca.pem")


def test_only_the_secrets_service_sees_the_generated_directory(compose: dict[str, Any]) -> None:
    """kcoord-secrets (root, one-shot) alone mounts deploy/secure/generated; every other service mounts
    its own volume, and the server's TLS volume is not Prometheus's nor the users' one."""
    mounts = {name: _mounts(_service(compose, name)) for name in SECURE_SERVICES}
    seeing = {name for name, m in mounts.items() if str(GENERATED) in m.values()}
    assert seeing == {"kcoord-secrets"}
    secrets = _service(compose, "kcoord-secrets")
    assert secrets["user"] == "0:0" and secrets["restart"] == "no"
    assert mounts["kcoord-secure"] == {
        "/var/lib/kcoord": "volume:kcoord-secure-data",
        "/run/kcoord-tls": "volume:kcoord-secure-tls",
    }
    assert mounts["kcoord-users"] == {
        "/var/lib/kcoord": "volume:kcoord-secure-data",
        "/run/kcoord-users": "volume:kcoord-secure-users",
    }
    assert mounts["kcoord-acls"] == {"/run/kcoord-admin": "volume:kcoord-secure-admin"}
    assert mounts["prometheus-secure"] == {
        "/etc/prometheus/prometheus.yml": str(PROMETHEUS_CONFIG),
        "/etc/prometheus/secure": "volume:prometheus-secure-secrets",
        "/prometheus": "volume:prometheus-secure-data",
    }
    for name in SECURE_SERVICES - {"kcoord-secrets"}:
        for volume in _service(compose, name)["volumes"]:
            if volume["target"] != "/var/lib/kcoord" and volume["target"] != "/prometheus":
                assert volume.get("read_only"), f"{name} mounts {volume['target']} writable"


def test_the_authorizer_is_on_with_one_super_user(compose: dict[str, Any]) -> None:
    """kcoord-secure: SASL_SSL with SCRAM-SHA-512 only, the authorizer on, ``admin`` the one super user,
    nothing allowed without an ACL; /metrics over TLS for ``prometheus`` only; ``app`` granted topic and
    group access but no Delete, Alter or All, and Prometheus no Kafka ACL at all."""
    service = _service(compose, "kcoord-secure")
    assert {k for k in service["environment"] if not k.startswith("KCOORD_CLIENT_")} <= set(SETTING_BY_ENV)
    settings = _secure_settings(compose)
    assert settings["listeners"] == "SASL_SSL://0.0.0.0:9093"
    assert settings["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert settings["authorizer.class.name"] == "kcoord.security.StandardAuthorizer"
    assert settings["super.users"] == "User:admin"
    assert settings["allow.everyone.if.no.acl.found"].lower() == "false"
    assert settings["kcoord.metrics.ssl.enable"].lower() == "true"
    assert settings["kcoord.metrics.auth.users"] == "prometheus"
    assert service["depends_on"]["kcoord-users"]["condition"] == "service_completed_successfully"
    for port in service["ports"]:
        assert port["host_ip"] == "127.0.0.1"
    acls = " ".join(_service(compose, "kcoord-acls")["command"])
    principals = set(re.findall(r"--principal (\S+)", acls))
    assert principals == {"User:app"}
    operations = set(re.findall(r"--operation (\S+)", acls))
    assert operations and not operations & {"Delete", "Alter", "AlterConfigs", "All", "ClusterAction"}
    assert _service(compose, "kcoord-acls")["depends_on"]["kcoord-secure"]["condition"] == "service_healthy"


def test_container_user_ids_match_the_images() -> None:
    """install-secrets.sh gives kcoord's files to uid 10001, the Dockerfile's USER."""
    (user,) = [ins.args for ins in dockerfile_final_stage() if ins.keyword == "USER"]
    assert user.split(":")[0] == str(KCOORD_UID)
    assert f"KCOORD_UID:-{KCOORD_UID}" in INSTALL.read_text()
    assert f"PROMETHEUS_UID:-{PROMETHEUS_UID}" in INSTALL.read_text()


@dataclass
class LocalProfile:
    """The profile's volumes as local directories; a service's commands with its mounts mapped here."""

    root: Path
    compose: dict[str, Any]

    def volume(self, name: str) -> Path:
        return self.root / "volumes" / name

    def local(self, service_name: str, text: str) -> str:
        """``text`` with each whole container path under one of the service's mounts moved to its local
        directory (in one pass, longest mount first), and compose's ``$$`` made ``$`` as compose does."""
        service = _service(self.compose, service_name)
        places = {}
        for target, source in _mounts(service).items():
            if source.startswith("volume:"):
                places[target] = str(self.volume(source.removeprefix("volume:")))
            else:
                places[target] = str(self.root / "generated") if Path(source) == GENERATED else source
        targets = "|".join(re.escape(t) for t in sorted(places, key=len, reverse=True))
        pattern = re.compile(rf"(?<![\w/.-])({targets})(?=$|[/\s\"'<>;])")
        return pattern.sub(lambda m: places[m.group(1)], text).replace("$$", "$")

    def run(self, service_name: str, args: list[str], moved: dict[str, str] | None = None) -> str:
        """``args`` of the service, run here (as this test's user) with its environment; ``moved``
        replaces container addresses by the local server's."""
        service = _service(self.compose, service_name)
        clean = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
        env = {k: self.local(service_name, v) for k, v in (service.get("environment") or {}).items()}
        path = f"{Path(sys.executable).parent}:{clean['PATH']}"
        command = [self.local(service_name, arg) for arg in args]
        for old, new in (moved or {}).items():
            command = [arg.replace(old, new) for arg in command]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env={**clean, **env, "PATH": path},
        )
        assert done.returncode == 0, f"{service_name}: {done.stdout}\n{done.stderr}"
        return done.stdout


@pytest.fixture(scope="module")
def profile(compose: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> LocalProfile:
    """setup.sh, then the one-shot services kcoord-secrets and kcoord-users, as ``up`` runs them."""
    local = LocalProfile(tmp_path_factory.mktemp("secure-profile"), compose)
    subprocess.run(
        ["sh", str(SETUP), str(local.root / "generated")], check=True, capture_output=True, timeout=120
    )
    for name in ("kcoord-secrets", "kcoord-users"):
        local.run(name, _service(compose, name)["command"])
    return local


def test_each_reader_gets_its_files_owned_and_private(profile: LocalProfile) -> None:
    """After kcoord-secrets, each volume holds only what its service reads, owned by that container's
    user at 0600 (the CA certificate 0644): Prometheus sees neither the TLS key nor the app's password,
    and the server sees no password."""
    k, p = KCOORD_UID, PROMETHEUS_UID
    assert _listing(profile.volume("kcoord-secure-tls")) == {
        "ca.pem": (k, PUBLIC),
        "server.pem": (k, PRIVATE),
    }
    assert _listing(profile.volume("kcoord-secure-users")) == {
        "admin.password": (k, PRIVATE),
        "app.password": (k, PRIVATE),
        "prometheus.password": (k, PRIVATE),
    }
    assert _listing(profile.volume("kcoord-secure-admin")) == {
        "admin.properties": (k, PRIVATE),
        "ca.pem": (k, PUBLIC),
    }
    assert _listing(profile.volume("prometheus-secure-secrets")) == {
        "ca.pem": (p, PUBLIC),
        "prometheus.password": (p, PRIVATE),
    }
    for volume in ("kcoord-secure-tls", "kcoord-secure-users", "kcoord-secure-admin"):
        assert (profile.volume(volume).stat().st_uid, _mode(profile.volume(volume))) == (k, 0o700)
    assert (
        profile.volume("prometheus-secure-secrets").stat().st_uid,
        _mode(profile.volume("prometheus-secure-secrets")),
    ) == (p, 0o700)


class ComposeKcoord(KcoordProcess):
    """kcoord-secure's settings with its listeners moved to free loopback ports."""

    def __init__(self, profile: LocalProfile) -> None:
        service = _service(profile.compose, "kcoord-secure")
        settings = {
            SETTING_BY_ENV[k]: profile.local("kcoord-secure", v)
            for k, v in service["environment"].items()
            if not k.startswith("KCOORD_CLIENT_")
        }
        for moved in ("listeners", "advertised.listeners", "kcoord.metrics.listen", "log.dirs"):
            settings.pop(moved)
        super().__init__(profile.volume("kcoord-secure-data"), settings)

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--listen") + 1] = "SASL_SSL://127.0.0.1:0"
        return cmd


@pytest.fixture(scope="module")
def served(profile: LocalProfile) -> Iterator[ComposeKcoord]:
    """kcoord-secure serving, then kcoord-acls run against it."""
    server = ComposeKcoord(profile)
    server.start()
    try:
        moved = {"localhost:9093": f"localhost:{server.port}", "kcoord-secure:9093": server.bootstrap}
        health = _service(profile.compose, "kcoord-secure")["healthcheck"]["test"]
        assert health[0] == "CMD"
        assert profile.run("kcoord-secure", health[1:], moved).strip() == "ok"
        profile.run("kcoord-acls", _service(profile.compose, "kcoord-acls")["command"], moved)
        yield server
    finally:
        server.terminate()
    assert not [e for e in server.logs if e.get("level") in ("error", "critical")]


def _kcoord(
    server: KcoordProcess, config: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
    connect = ["--bootstrap", server.bootstrap, "--command-config", str(config)]
    return subprocess.run(
        [sys.executable, "-m", "kcoord", *args, *connect],
        input=stdin, capture_output=True, text=True, timeout=90, check=False, env=clean,
    )  # fmt: skip


def test_app_may_use_topics_and_groups_but_not_administer(
    profile: LocalProfile, served: ComposeKcoord
) -> None:
    """With setup.sh's app.properties, ``app`` creates a topic, produces and consumes in a group; it
    may not delete the topic, change ``prometheus``'s password or grant itself ACLs. Prometheus's
    user can do nothing over Kafka."""
    app = profile.root / "generated" / "app.properties"
    topic, group = f"orders-{uuid.uuid4().hex[:6]}", f"shop-{uuid.uuid4().hex[:6]}"
    for args, stdin in (
        (("topics", "create", topic, "--partitions", "1"), None),
        (("produce", topic), "one\ntwo\n"),
        (("consume", topic, "--group", group, "--from-beginning", "--max-messages", "2"), None),
    ):
        done = _kcoord(served, app, *args, stdin=stdin)
        assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["one", "two"]
    refusals = {
        ("topics", "delete", topic): "TOPIC_AUTHORIZATION_FAILED",
        ("users", "add", "prometheus", "--password-stdin"): "CLUSTER_AUTHORIZATION_FAILED",
        (
            "acls",
            "add",
            "--cluster",
            "--principal",
            "User:app",
            "--operation",
            "All",
        ): "CLUSTER_AUTHORIZATION_FAILED",
    }
    for args, error in refusals.items():
        done = _kcoord(served, app, *args, stdin="taken\n")
        assert done.returncode == 1 and error in done.stderr, (args, done.stderr)
    generated = profile.root / "generated"
    prometheus = profile.root / "prometheus.properties"
    prometheus.write_text(
        app.read_text()
        .replace("sasl.username=app", "sasl.username=prometheus")
        .replace((generated / "app.password").read_text(), (generated / "prometheus.password").read_text())
    )
    denied = _kcoord(served, prometheus, "topics", "create", f"p-{uuid.uuid4().hex[:6]}")
    assert denied.returncode == 1 and "AUTHORIZATION_FAILED" in denied.stderr, denied.stderr


def _wait_for_up(address: str, timeout_s: float = 90.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    last: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        last = query(address, 'up{job="kcoord"}')
        if last and last[0]["value"][1] == "1":
            return last
        time.sleep(0.5)
    raise AssertionError(f"Prometheus never scraped kcoord: {last}")


@pytest.mark.clients
def test_prometheus_scrapes_with_only_its_own_volume(
    profile: LocalProfile, served: ComposeKcoord, tmp_path: Path
) -> None:
    """prometheus-secure.yml with its paths in Prometheus's own volume (the CA and its password) scrapes
    the server over TLS with Basic auth; without the password /metrics answers 401."""
    assert served.metrics_address is not None
    tls = ssl.create_default_context(cafile=str(profile.volume("prometheus-secure-secrets") / "ca.pem"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(
            f"https://localhost:{port_of(served.metrics_address)}/metrics", context=tls, timeout=10
        )
    assert refused.value.code == 401
    (job,) = load_yaml(PROMETHEUS_CONFIG)["scrape_configs"]
    assert job["scheme"] == "https" and job["basic_auth"]["username"] == "prometheus"
    for key, section in (("ca_file", "tls_config"), ("password_file", "basic_auth")):
        job[section][key] = profile.local("prometheus-secure", job[section][key])
        assert Path(job[section][key]).parent == profile.volume("prometheus-secure-secrets")
    job["static_configs"] = [{"targets": [served.metrics_address]}]
    prometheus, address = launch_prometheus(
        tmp_path, json.dumps({"global": {"scrape_interval": "1s"}, "scrape_configs": [job]})
    )
    try:
        (series,) = _wait_for_up(address)
        assert series["metric"]["instance"] == served.metrics_address
    finally:
        prometheus.terminate()
        prometheus.wait(30)
