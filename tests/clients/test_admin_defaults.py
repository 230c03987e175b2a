"""confluent-kafka's AdminClient against Kafka's defaults on one node: a large CreateTopics meets no
creation quota, and broker configs altered with AlterConfigs and IncrementalAlterConfigs are
applied, described as DYNAMIC_BROKER_CONFIG and kept across a restart."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

NODE = "1"
"""The node id of a server started on a fresh data directory with the default ``node.id``."""


def _admin(server: KcoordProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, "socket.timeout.ms": 10_000})


def _broker_configs(server: KcoordProcess, *names: str) -> dict[str, tuple[str | None, int]]:
    admin = _admin(server)
    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, NODE)]).values()
    described = future.result(timeout=15)
    return {name: (described[name].value, described[name].source) for name in names}


def test_one_create_topics_of_100_topics_with_4_partitions_succeeds(kcoord: KcoordProcess) -> None:
    """Without a configured controller mutation quota (Kafka's default), one CreateTopics request for
    100 topics of 4 partitions creates every one of them."""
    prefix = f"many-{uuid.uuid4().hex[:6]}"
    topics = [NewTopic(f"{prefix}-{index:03d}", 4, 1) for index in range(100)]
    admin = _admin(kcoord)
    futures = admin.create_topics(topics, operation_timeout=30, request_timeout=60)
    failures = {}
    for name, future in futures.items():
        try:
            future.result(timeout=60)
        except KafkaException as exc:
            failures[name] = exc.args[0]
    assert failures == {}
    metadata = admin.list_topics(timeout=15)
    created = {name: len(t.partitions) for name, t in metadata.topics.items() if name.startswith(prefix)}
    assert created == {topic.topic: 4 for topic in topics}


def _refused_from_127_0_0_2(server: KcoordProcess, timeout: float = 5.0) -> bool:
    """Whether a connection from 127.0.0.2 is closed at once by the server (what
    ``max.connections.per.ip.overrides=127.0.0.2:0`` does) rather than left open."""
    with socket.create_connection(
        ("127.0.0.1", server.port), timeout=5, source_address=("127.0.0.2", 0)
    ) as sock:
        sock.settimeout(timeout)
        try:
            return sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_broker_configs_altered_by_the_admin_client_apply_and_survive_a_restart(
    kcoord: KcoordProcess,
) -> None:
    """AlterConfigs sets log.retention.ms and IncrementalAlterConfigs max.connections.per.ip.overrides
    on the node: both are described as DYNAMIC_BROKER_CONFIG, the new override refuses connections
    from its address at once, both survive a restart, and a static setting is refused per key."""
    assert not _refused_from_127_0_0_2(kcoord, timeout=1.0)
    admin = _admin(kcoord)
    legacy = ConfigResource(ResourceType.BROKER, NODE, set_config={"log.retention.ms": "3600000"})
    (future,) = admin.alter_configs([legacy]).values()
    future.result(timeout=15)
    incremental = ConfigResource(
        ResourceType.BROKER,
        NODE,
        incremental_configs=[
            ConfigEntry(
                "max.connections.per.ip.overrides", "127.0.0.2:0", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    (future,) = admin.incremental_alter_configs([incremental]).values()
    future.result(timeout=15)
    assert _refused_from_127_0_0_2(kcoord)
    dynamic = ConfigSource.DYNAMIC_BROKER_CONFIG.value
    expected: dict[str, Any] = {
        "log.retention.ms": ("3600000", dynamic),
        "max.connections.per.ip.overrides": ("127.0.0.2:0", dynamic),
    }
    kcoord.restart()
    assert _refused_from_127_0_0_2(kcoord)
    assert _broker_configs(kcoord, *expected) == expected

    admin = _admin(kcoord)
    reset = ConfigResource(
        ResourceType.BROKER,
        NODE,
        incremental_configs=[
            ConfigEntry(
                "max.connections.per.ip.overrides", None, incremental_operation=AlterConfigOpType.DELETE
            ),
            ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    (future,) = admin.incremental_alter_configs([reset]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(timeout=15)
    assert "Cannot update these configs dynamically: num.partitions" in str(refused.value)
    overrides = "max.connections.per.ip.overrides"
    assert _broker_configs(kcoord, overrides) == {overrides: ("127.0.0.2:0", dynamic)}
