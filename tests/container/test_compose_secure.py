"""The compose ``secure`` profile: it validates, its parts agree, and its Prometheus scrape config
scrapes a real kcoord over TLS with Basic auth (certificates and users made as the profile makes them)."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kcoord.config import DEFINITIONS, env_name
from tests.container.files import DEPLOY, compose_config, effective_settings, load_yaml, port_of
from tests.observability.test_prometheus_and_late_member import launch_prometheus, query
from tests.support.server import KcoordProcess

SETUP = DEPLOY / "secure" / "setup.sh"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus-secure.yml"
SECURE_SERVICES = {"kcoord-users", "kcoord-secure", "prometheus-secure"}


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


def _mount_source(service: dict[str, Any], path: str) -> Path:
    """The host path mounted where ``path`` lives in the container."""
    for volume in service["volumes"]:
        target = volume["target"]
        if path == target or path.startswith(target.rstrip("/") + "/"):
            return Path(volume["source"]) / Path(path).relative_to(target)
    raise AssertionError(f"{path} is not mounted")


def _scrape_job() -> dict[str, Any]:
    (job,) = load_yaml(PROMETHEUS_CONFIG)["scrape_configs"]
    assert isinstance(job, dict)
    return job


def test_secure_profile_validates_and_leaves_the_default_services(compose: dict[str, Any]) -> None:
    """``docker compose --profile secure config`` is valid; without the profile the three services stay."""
    assert set(compose["services"]) == {"kcoord", "prometheus", "grafana"} | SECURE_SERVICES
    assert set(compose_config()["services"]) == {"kcoord", "prometheus", "grafana"}


def test_secure_kcoord_is_configured_for_sasl_ssl_scram_and_tls_metrics(compose: dict[str, Any]) -> None:
    """kcoord-secure's configuration: one SASL_SSL listener with SCRAM-SHA-512 only, its HTTP
    endpoint over TLS with Basic auth, the key from the directory setup.sh fills, the users made
    before it starts (the generated-config test below runs a real kcoord with these settings)."""
    service = _service(compose, "kcoord-secure")
    env_names = {env_name(d.name) for d in DEFINITIONS}
    assert set(service["environment"]) <= env_names
    settings = _secure_settings(compose)
    assert settings["listeners"] == "SASL_SSL://0.0.0.0:9093"
    assert settings["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert settings["kcoord.metrics.ssl.enable"].lower() == "true"
    assert settings["kcoord.metrics.auth.users"] == "prometheus"
    keystore = _mount_source(service, settings["ssl.keystore.location"])
    assert keystore == DEPLOY / "secure" / "generated" / "server.pem"
    assert service["depends_on"]["kcoord-users"]["condition"] == "service_completed_successfully"
    users = _service(compose, "kcoord-users")
    script = " ".join(users["command"])
    data_dir = settings["log.dirs"]
    for user in ("app", "prometheus"):
        assert f"kcoord users add {user} --mechanism SCRAM-SHA-512 --data-dir {data_dir}" in script
    assert _mount_source(users, data_dir) == _mount_source(service, data_dir)
    for port in service["ports"]:
        assert port["host_ip"] == "127.0.0.1"


def test_secure_prometheus_config_targets_https_with_basic_auth(compose: dict[str, Any]) -> None:
    """prometheus-secure's configuration loads prometheus-secure.yml: https, the generated CA, the
    prometheus user (the scrape itself is tested below against a real kcoord)."""
    service = _service(compose, "prometheus-secure")
    config_path = next(a for a in service["command"] if a.startswith("--config.file=")).split("=", 1)[1]
    assert _mount_source(service, config_path) == PROMETHEUS_CONFIG
    job = _scrape_job()
    settings = _secure_settings(compose)
    assert job["scheme"] == "https"
    assert job["basic_auth"]["username"] in settings["kcoord.metrics.auth.users"].split(",")
    generated = DEPLOY / "secure" / "generated"
    assert _mount_source(service, job["tls_config"]["ca_file"]) == generated / "ca.pem"
    assert _mount_source(service, job["basic_auth"]["password_file"]) == generated / "prometheus.password"
    targets = [t for static in job["static_configs"] for t in static["targets"]]
    assert targets == [f"kcoord-secure:{port_of(settings['kcoord.metrics.listen'])}"]


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
def test_generated_scrape_config_scrapes_a_real_kcoord_over_tls(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    """setup.sh's certificates and passwords, users made with ``kcoord users add``, kcoord serving
    /metrics as kcoord-secure does, and Prometheus with prometheus-secure.yml (paths and target
    moved to this machine): the target is up; without the password /metrics answers 401."""
    generated = tmp_path / "generated"
    subprocess.run(["sh", str(SETUP), str(generated)], check=True, capture_output=True, timeout=120)
    data_dir = tmp_path / "data"
    password = (generated / "prometheus.password").read_text()
    subprocess.run(
        [sys.executable, "-m", "kcoord", "users", "add", "prometheus", "--mechanism", "SCRAM-SHA-512",
         "--data-dir", str(data_dir), "--password-stdin"],
        input=password, text=True, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    settings = _secure_settings(compose)
    served = {
        name: settings[name]
        for name in ("sasl.enabled.mechanisms", "kcoord.metrics.ssl.enable", "kcoord.metrics.auth.users")
    }
    served["ssl.keystore.location"] = str(generated / "server.pem")
    kcoord = KcoordProcess(data_dir, served).start()
    try:
        assert kcoord.metrics_address is not None
        tls = ssl.create_default_context(cafile=str(generated / "ca.pem"))
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"https://localhost:{kcoord.metrics_address.split(':')[1]}/metrics",
                                   context=tls, timeout=10)  # fmt: skip
        assert refused.value.code == 401
        job = _scrape_job()
        job["tls_config"]["ca_file"] = str(generated / "ca.pem")
        job["basic_auth"]["password_file"] = str(generated / "prometheus.password")
        job["static_configs"] = [{"targets": [kcoord.metrics_address]}]
        prometheus, address = launch_prometheus(
            tmp_path, json.dumps({"global": {"scrape_interval": "1s"}, "scrape_configs": [job]})
        )
        try:
            (series,) = _wait_for_up(address)
            assert series["metric"]["instance"] == kcoord.metrics_address
        finally:
            prometheus.terminate()
            prometheus.wait(30)
    finally:
        kcoord.terminate()
