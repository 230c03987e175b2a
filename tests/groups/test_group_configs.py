"""Group configs with confluent-kafka's AdminClient over real sockets: alter, describe, restart,
and a consumer-protocol member that is handed the group's own heartbeat interval."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess
from tests.support.share_consumers import (
    create_topic,
    new_consumer,
    produce_numbers,
    start_members,
    wait_for,
)

pytestmark = pytest.mark.clients

SETTINGS = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.session.timeout.ms": "6000"}
SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"
SHARE_RESET = "share.auto.offset.reset"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[KcoordProcess]:
    process = KcoordProcess(tmp_path / "data", SETTINGS).start()
    try:
        yield process
    finally:
        process.kill()


def _admin(server: KcoordProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, "socket.timeout.ms": 10_000})


def _alter(server: KcoordProcess, group: str, values: dict[str, str | None]) -> None:
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        if value is not None
        else ConfigEntry(name, "", incremental_operation=AlterConfigOpType.DELETE)
        for name, value in values.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = _admin(server)
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(timeout=15)


def _describe(server: KcoordProcess, group: str) -> dict[str, Any]:
    admin = _admin(server)
    (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    return {name: (entry.value, entry.source) for name, entry in future.result(timeout=15).items()}


def _heartbeat_interval(server: KcoordProcess, group: str) -> int:
    """A KIP-848 join (ConsumerGroupHeartbeat v0) and the heartbeat interval the coordinator gives."""
    with RawClient(server.host, server.port) as raw:
        response = raw.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            0,
            {
                "group_id": group,
                "member_id": str(uuid.uuid4()),
                "member_epoch": 0,
                "rebalance_timeout": 30_000,
                "subscribed_topic_names": ["no-topic-yet"],
                "topic_partitions": [],
            },
        )
    assert response.error_code == ErrorCode.none
    return int(response.heartbeat_interval.total_seconds() * 1000)


def test_one_group_is_tuned_and_keeps_its_configs_across_a_restart(server: KcoordProcess) -> None:
    _alter(server, "tuned", {HEARTBEAT: "1500", SESSION: "9000"})
    altered = server.wait_for_event("group.configs.altered")
    assert (altered["group"], altered["configs"]) == ("tuned", {HEARTBEAT: 1500, SESSION: 9000})

    assert _describe(server, "tuned") == {
        HEARTBEAT: ("1500", ConfigSource.GROUP_CONFIG.value),
        SESSION: ("9000", ConfigSource.GROUP_CONFIG.value),
        SHARE_RESET: ("latest", ConfigSource.DEFAULT_CONFIG.value),
    }
    assert _describe(server, "untouched") == {
        HEARTBEAT: ("500", ConfigSource.STATIC_BROKER_CONFIG.value),
        SESSION: ("6000", ConfigSource.STATIC_BROKER_CONFIG.value),
        SHARE_RESET: ("latest", ConfigSource.DEFAULT_CONFIG.value),
    }
    assert _heartbeat_interval(server, "tuned") == 1500
    assert _heartbeat_interval(server, "untouched") == 500

    server.kill()
    server.start()
    assert _describe(server, "tuned")[HEARTBEAT] == ("1500", ConfigSource.GROUP_CONFIG.value)
    assert _heartbeat_interval(server, "tuned") == 1500

    _alter(server, "tuned", {HEARTBEAT: None})
    assert _describe(server, "tuned")[HEARTBEAT] == ("500", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert _heartbeat_interval(server, "tuned") == 500


def test_share_auto_offset_reset_is_a_group_config_a_share_group_starts_by(server: KcoordProcess) -> None:
    """share.auto.offset.reset=earliest (Kafka's text group config) is kept and described; a share
    group with it reads what was produced before its first fetch; any other value is INVALID_CONFIG."""
    _alter(server, "from-start", {SHARE_RESET: "earliest"})
    assert _describe(server, "from-start")[SHARE_RESET] == ("earliest", ConfigSource.GROUP_CONFIG.value)
    with pytest.raises(KafkaException) as raised:
        _alter(server, "from-start", {SHARE_RESET: "sometime"})
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG
    create_topic(server.bootstrap, "backlog")
    produce_numbers(server.bootstrap, "backlog", 5)
    (member,) = start_members(1, lambda: new_consumer(server.bootstrap, "from-start", "backlog"))
    try:
        wait_for(lambda: len(member.delivered) >= 5, 30, "the backlog delivered")
    finally:
        member.close()
    assert sorted(member.delivered) == [0, 1, 2, 3, 4]


def test_invalid_values_are_refused_and_change_nothing(server: KcoordProcess) -> None:
    with pytest.raises(KafkaException) as raised:
        _alter(server, "g", {HEARTBEAT: "7000"})
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG
    with pytest.raises(KafkaException) as raised:
        _alter(server, "g", {"consumer.unknown.ms": "1"})
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert _describe(server, "g")[HEARTBEAT] == ("500", ConfigSource.STATIC_BROKER_CONFIG.value)
