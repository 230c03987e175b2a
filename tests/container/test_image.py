"""Acceptance 8: the image is built and run for real, without a registry or a Docker engine.

mmdebstrap makes a Debian base with python3 from Debian packages, buildah (chroot isolation, vfs storage)
builds the Dockerfile on it through ``ARG BASE``, and the image's own command runs with the host's network
on loopback ports, where kafka-python produces, forms a group and consumes through it.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # type: ignore[import-untyped]

from tests.container.files import TOOLS_SCRIPT
from tests.container.image import Buildah, RunningContainer, base_tarball, host_codename, wheelhouse
from tests.support.kafka_python import subscribe_when_known

pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]

IMAGE = "localhost/kcoord:acceptance"
BASE_IMAGE = "localhost/kcoord-base:acceptance"
TOPIC = "through-the-image"
GROUP = "image-group"
PARTITIONS = 3
MESSAGES = 300


@pytest.fixture(scope="module")
def buildah(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Buildah]:
    """buildah and mmdebstrap installed (apt-get when missing), and the image built on a fresh vfs store."""
    subprocess.run(["bash", str(TOOLS_SCRIPT), "--image"], check=True, timeout=900, stdout=subprocess.DEVNULL)
    work = tmp_path_factory.mktemp("image")
    builder = Buildah(work / "buildah")
    started = time.monotonic()
    builder.import_rootfs(base_tarball(host_codename()), BASE_IMAGE)
    builder.build(IMAGE, BASE_IMAGE, wheelhouse(work / "wheelhouse"))
    print(f"image built in {time.monotonic() - started:.0f}s")
    try:
        yield builder
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def image_config(buildah: Buildah) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(buildah("inspect", "--type", "image", IMAGE))["Docker"]["config"]
    return config


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server(
    buildah: Buildah, image_config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningContainer, str, str]]:
    """The image's own command, its listeners moved to free loopback ports through the environment."""
    kafka = f"127.0.0.1:{_free_port()}"
    metrics = f"127.0.0.1:{_free_port()}"
    container = RunningContainer(buildah, IMAGE, tmp_path_factory.mktemp("run") / "kcoord.log")
    container.start(
        image_config["Cmd"],
        {
            "KCOORD_LISTENERS": kafka,
            "KCOORD_KCOORD_METRICS_LISTEN": metrics,
            "KCOORD_NUM_PARTITIONS": str(PARTITIONS),
            "KCOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        },
    )
    try:
        container.wait_for_log('"kcoord.started"', timeout=60)
        yield container, kafka, metrics
    finally:
        container.stop()


def test_image_config_runs_kcoord_serve_as_non_root_with_volume_and_ports(
    image_config: dict[str, Any],
) -> None:
    """The image runs ``kcoord serve`` as non-root, with the data volume, both ports and a healthcheck."""
    assert image_config["Cmd"] == ["kcoord", "serve"]
    assert image_config["User"].split(":")[0] not in ("", "0", "root")
    assert set(image_config["Volumes"]) == {"/var/lib/kcoord"}
    assert set(image_config["ExposedPorts"]) == {"9092/tcp", "9644/tcp"}
    assert image_config["Healthcheck"]["Test"][1:3] == ["kcoord", "health"]


def _produce(bootstrap: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for future in [
            producer.send(TOPIC, key=f"k{i % 17}".encode(), value=f"{i}".encode()) for i in range(MESSAGES)
        ]:
            future.get(timeout=20)
    finally:
        producer.close(timeout=5)


def _consume_in_group(bootstrap: str) -> tuple[list[int], set[TopicPartition]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    subscribe_when_known(consumer, TOPIC)
    values: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(values) < MESSAGES and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(int(r.value) for r in records)
        consumer.commit()
        return values, set(consumer.assignment())
    finally:
        consumer.close()


def test_client_produces_forms_a_group_and_consumes_through_the_image(
    server: tuple[RunningContainer, str, str],
) -> None:
    """kafka-python produces through the image, joins a group, gets every partition and reads it all."""
    _, bootstrap, _ = server
    _produce(bootstrap)
    values, assignment = _consume_in_group(bootstrap)
    assert sorted(values) == list(range(MESSAGES))
    assert assignment == {TopicPartition(TOPIC, p) for p in range(PARTITIONS)}
    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        committed = [reader.committed(tp) for tp in sorted(assignment)]
    finally:
        reader.close()
    assert sum(offset or 0 for offset in committed) == MESSAGES


def test_metrics_endpoint_and_healthcheck_answer_from_the_image(
    server: tuple[RunningContainer, str, str], image_config: dict[str, Any]
) -> None:
    """The metrics listener serves /metrics, and the image's HEALTHCHECK command succeeds."""
    container, bootstrap, metrics = server
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as response:
        assert b"# TYPE kcoord_requests_total counter" in response.read()
    health = [*image_config["Healthcheck"]["Test"][1:-1], bootstrap]
    done = container.exec(health)
    assert done.returncode == 0, done.stdout + done.stderr
