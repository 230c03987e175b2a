"""docker-compose.yml as ``docker compose config`` renders it: valid, and its services agree with the
CLI, the image and each other. Nothing is started here; each test checks the rendered configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.config import DEFINITIONS, env_name
from tests.container.files import (
    DEPLOY,
    REPO,
    compose_config,
    dockerfile_final_stage,
    dockerfile_json_args,
    effective_settings,
    load_yaml,
    port_of,
)

SETTING_ENV_NAMES = {env_name(d.name) for d in DEFINITIONS}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return compose_config()


def _service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    service: dict[str, Any] = compose["services"][name]
    return service


def _mount(service: dict[str, Any], target: str) -> dict[str, Any]:
    for volume in service.get("volumes", []):
        if volume["target"] == target:
            found: dict[str, Any] = volume
            return found
    raise AssertionError(f"nothing mounted at {target}")


def _kcoord_settings(compose: dict[str, Any]) -> dict[str, str]:
    service = _service(compose, "kcoord")
    command = service["command"]
    assert command[:2] == ["kcoord", "serve"]
    return effective_settings(dict(service.get("environment") or {}), command[2:])


def test_compose_config_accepts_the_file_and_declares_three_services(compose: dict[str, Any]) -> None:
    """``docker compose config`` accepts the file, which declares kcoord, Prometheus and Grafana."""
    assert set(compose["services"]) == {"kcoord", "prometheus", "grafana"}


def test_kcoord_environment_names_real_settings(compose: dict[str, Any]) -> None:
    """Every KCOORD_ variable of the kcoord service is the environment name of a defined setting."""
    env = _service(compose, "kcoord")["environment"]
    names = {name for name in env if name.startswith("KCOORD_")}
    assert names <= SETTING_ENV_NAMES, names - SETTING_ENV_NAMES


def test_kcoord_ports_are_published_on_loopback(compose: dict[str, Any]) -> None:
    """The Kafka and metrics ports the settings bind are the published ones, on the host's loopback only."""
    settings = _kcoord_settings(compose)
    ports = _service(compose, "kcoord")["ports"]
    targets = {int(p["target"]) for p in ports}
    assert targets == {port_of(settings["listeners"]), port_of(settings["kcoord.metrics.listen"])}
    assert settings["listeners"].startswith("PLAINTEXT://0.0.0.0:")
    assert settings["kcoord.metrics.listen"].startswith("0.0.0.0:")
    for service in compose["services"].values():
        for port in service.get("ports", []):
            assert port["host_ip"] == "127.0.0.1", port


def test_advertised_listener_is_the_published_kafka_port(compose: dict[str, Any]) -> None:
    """Host clients can reach the advertised address: it names the host port Kafka is published on."""
    settings = _kcoord_settings(compose)
    kafka_port = port_of(settings["listeners"])
    published = {int(p["target"]): int(p["published"]) for p in _service(compose, "kcoord")["ports"]}
    assert port_of(settings["advertised.listeners"]) == published[kafka_port]


def test_data_directory_is_a_named_volume_matching_the_image(compose: dict[str, Any]) -> None:
    """log.dirs is a named volume, at the same path as the image's VOLUME."""
    settings = _kcoord_settings(compose)
    mount = _mount(_service(compose, "kcoord"), settings["log.dirs"])
    assert mount["type"] == "volume"
    assert dockerfile_json_args(dockerfile_final_stage(), "VOLUME") == [settings["log.dirs"]]


def test_prometheus_config_targets_the_kcoord_metrics_port(compose: dict[str, Any]) -> None:
    """The Prometheus service mounts deploy/prometheus/prometheus.yml as its config file, whose kcoord
    job targets the kcoord service's metrics port (configuration only: no scrape happens here)."""
    service = _service(compose, "prometheus")
    config_flag = next(a for a in service["command"] if a.startswith("--config.file="))
    config_path = config_flag.split("=", 1)[1]
    mount = _mount(service, config_path)
    assert Path(mount["source"]) == DEPLOY / "prometheus" / "prometheus.yml"
    config = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
    metrics_port = port_of(_kcoord_settings(compose)["kcoord.metrics.listen"])
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = jobs["kcoord"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    targets = [t for static in job["static_configs"] for t in static["targets"]]
    assert targets == [f"kcoord:{metrics_port}"]


def test_grafana_provisioning_config_points_at_prometheus_and_the_dashboard(compose: dict[str, Any]) -> None:
    """Grafana's mounted provisioning files point at the Prometheus service and at the mounted
    dashboard directory (configuration only: Grafana does not run here)."""
    service = _service(compose, "grafana")
    provisioning = _mount(service, "/etc/grafana/provisioning")
    assert Path(provisioning["source"]) == DEPLOY / "grafana" / "provisioning"
    datasources = load_yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml")
    (datasource,) = datasources["datasources"]
    assert datasource["type"] == "prometheus"
    prometheus_ports = {int(p["target"]) for p in _service(compose, "prometheus")["ports"]}
    assert datasource["url"] in {f"http://prometheus:{port}" for port in prometheus_ports}
    providers = load_yaml(DEPLOY / "grafana" / "provisioning" / "dashboards" / "kcoord.yml")
    (provider,) = providers["providers"]
    dashboards = _mount(service, provider["options"]["path"])
    assert Path(dashboards["source"]) == DEPLOY / "grafana" / "dashboards"
    assert (REPO / "deploy" / "grafana" / "dashboards" / "kcoord.json").is_file()


def test_cluster_profile_declares_three_nodes_over_one_postgres() -> None:
    """The ``cluster`` profile's configuration adds PostgreSQL and three clustered nodes with distinct
    ids, each advertising the loopback port it is published on, all on the same database, whose URL
    carries no password (PGPASSWORD does) (configuration only: the nodes run together in
    tests/cluster_nodes, without Docker)."""
    compose = compose_config("cluster")
    nodes = [f"kcoord-{n}" for n in (1, 2, 3)]
    assert {"postgres", *nodes} <= set(compose["services"])
    ids, urls = set(), set()
    for name in nodes:
        service = _service(compose, name)
        env = dict(service["environment"])
        assert {n for n in env if n.startswith("KCOORD_")} <= SETTING_ENV_NAMES
        settings = effective_settings(env, service["command"][2:])
        assert settings["kcoord.cluster.enable"] == "true"
        ids.add(str(settings["node.id"]))
        urls.add(settings["kcoord.storage.url"])
        assert env["PGPASSWORD"]  # the password comes from libpq's variable, not the URL
        published = {int(p["target"]): int(p["published"]) for p in service["ports"]}
        assert port_of(settings["advertised.listeners"]) == published[port_of(settings["listeners"])]
    assert ids == {"1", "2", "3"}
    (url,) = urls
    assert "@postgres:" in url and ":" not in url.removeprefix("postgresql://").split("@")[0]
