"""Topic configs with confluent-kafka's AdminClient over real sockets on one node: create with
overrides, IncrementalAlterConfigs (SET, APPEND, DELETE), DescribeConfigs, a restart, and a
producer refused by the new max.message.bytes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
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


def _admin(server: KcoordProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, "socket.timeout.ms": 10_000})


def _alter(server: KcoordProcess, topic: str, entries: list[ConfigEntry]) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin = _admin(server)
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(timeout=15)


def _describe(server: KcoordProcess, topic: str) -> dict[str, Any]:
    admin = _admin(server)
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return {name: (entry.value, entry.source) for name, entry in future.result(timeout=15).items()}


def test_topic_configs_are_altered_described_kept_and_enforced(kcoord: KcoordProcess) -> None:
    """Overrides given at creation and changed with IncrementalAlterConfigs are described as
    DYNAMIC_TOPIC_CONFIG, survive a restart, a DELETE takes one back to the default, and a
    producer's batch over the new max.message.bytes is refused with MSG_SIZE_TOO_LARGE."""
    topic = f"tuned-{uuid.uuid4().hex[:8]}"
    admin = _admin(kcoord)
    (created,) = admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "3600000"})]).values()
    created.result(timeout=15)
    dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert _describe(kcoord, topic)["retention.ms"] == ("3600000", dynamic)

    _alter(
        kcoord,
        topic,
        [
            ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    kcoord.restart()
    described = _describe(kcoord, topic)
    assert described["max.message.bytes"] == ("2000", dynamic)
    assert described["cleanup.policy"] == ("delete,compact", dynamic)
    assert described["retention.ms"] == ("3600000", dynamic)

    _alter(kcoord, topic, [ConfigEntry("retention.ms", "", incremental_operation=AlterConfigOpType.DELETE)])
    assert _describe(kcoord, topic)["retention.ms"] == ("604800000", ConfigSource.DEFAULT_CONFIG.value)

    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": kcoord.bootstrap, "linger.ms": 0})
    for value in (b"x" * 3000, b"y" * 100):  # one batch each: the small one alone fits
        producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
        assert producer.flush(30) == 0
    assert [None if e is None else e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE, None]

    with pytest.raises(KafkaException) as refused:
        _alter(
            kcoord, topic, [ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)]
        )
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
