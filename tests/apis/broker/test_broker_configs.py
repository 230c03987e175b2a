"""Dynamic broker configs and AlterConfigs on one node: IncrementalAlterConfigs and AlterConfigs on
BROKER resources, per-key refusals as Kafka answers them, DescribeConfigs' sources, the logs taking
the new broker default at once, the file they are kept in, and AlterConfigs' replace semantics on
TOPIC and GROUP resources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.apis.broker.describe_configs import RESOURCE_BROKER, RESOURCE_TOPIC
from kcoord.apis.broker.group_config_entries import RESOURCE_GROUP
from kcoord.cluster.broker_configs import BROKER_CONFIGS_FILE, BrokerConfigs
from kcoord.cluster.topic_configs import DELETE, SET, ConfigSource
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.apis.broker.topic_app import NODE_ID, TopicApp, call, make_settings, open_app, secured_app

Operation = tuple[str, int, str | None]


async def _incremental(app: TopicApp, kind: int, name: str, ops: list[Operation]) -> tuple[int, str | None]:
    body = {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops],
            }
        ],
        "validate_only": False,
    }
    (answer,) = (await call(app, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)).responses
    return int(answer.error_code), answer.error_message


async def _replace(
    app: TopicApp,
    kind: int,
    name: str,
    configs: dict[str, str],
    version: int = 2,
    validate_only: bool = False,
) -> tuple[int, str | None]:
    body = {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [{"name": n, "value": v} for n, v in configs.items()],
            }
        ],
        "validate_only": validate_only,
    }
    (answer,) = (await call(app, ApiKey.ALTER_CONFIGS, version, body)).responses
    return int(answer.error_code), answer.error_message


async def _described(app: TopicApp, kind: int, name: str, key: str) -> tuple[str | None, int, bool]:
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": [key]}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    answer: Any = await call(app, ApiKey.DESCRIBE_CONFIGS, 4, body)
    (entry,) = answer.results[0].configs
    return entry.value, int(entry.config_source), entry.read_only


async def test_a_broker_config_set_incrementally_applies_to_the_logs_and_is_described(tmp_path: Path) -> None:
    """SET log.retention.ms on this node: DescribeConfigs shows it as DYNAMIC_BROKER_CONFIG on the
    broker and as the topic's value, and an existing topic's logs take it at once; DELETE restores
    the default everywhere."""
    app = await open_app(tmp_path)
    await app.topics.create("t", 2)
    node = str(NODE_ID)
    assert await _incremental(app, RESOURCE_BROKER, node, [("log.retention.ms", SET, "60000")]) == (0, None)
    assert await _described(app, RESOURCE_BROKER, node, "log.retention.ms") == (
        "60000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        False,
    )
    topic_value = await _described(app, RESOURCE_TOPIC, "t", "retention.ms")
    assert topic_value[:2] == ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    for partition in range(2):
        log = app.store.get("t", partition)
        assert log is not None and log.config.retention_ms == 60000

    assert await _incremental(app, RESOURCE_BROKER, node, [("log.retention.ms", DELETE, None)]) == (0, None)
    assert (await _described(app, RESOURCE_BROKER, node, "log.retention.ms"))[:2] == (
        "604800000",
        ConfigSource.DEFAULT_CONFIG,
    )
    log = app.store.get("t", 0)
    assert log is not None and log.config.retention_ms == 604800000


async def test_the_node_value_beats_the_cluster_default(tmp_path: Path) -> None:
    """A value set on the cluster default (resource ``""``) applies as DYNAMIC_DEFAULT_BROKER_CONFIG
    until this node's own value replaces it."""
    app = await open_app(tmp_path)
    assert await _replace(app, RESOURCE_BROKER, "", {"message.max.bytes": "5000"}) == (0, None)
    assert app.settings["message.max.bytes"] == 5000
    described = await _described(app, RESOURCE_BROKER, str(NODE_ID), "message.max.bytes")
    assert described[:2] == ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (await _described(app, RESOURCE_BROKER, "", "message.max.bytes"))[:2] == (
        "5000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert await _replace(app, RESOURCE_BROKER, str(NODE_ID), {"message.max.bytes": "7000"}) == (0, None)
    assert app.settings["message.max.bytes"] == 7000
    assert app.settings.source("message.max.bytes") == "dynamic broker config"


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_settings_that_cannot_change_at_run_time_are_refused_per_key(
    tmp_path: Path, version: int
) -> None:
    """AlterConfigs naming a static setting answers INVALID_REQUEST "Cannot update these configs
    dynamically", an unknown name or a bad value INVALID_CONFIG, another node's id INVALID_REQUEST;
    nothing changes."""
    app = await open_app(tmp_path)
    node = str(NODE_ID)
    code, message = await _replace(app, RESOURCE_BROKER, node, {"num.partitions": "3"}, version)
    assert code == ErrorCode.invalid_request
    assert message == "Cannot update these configs dynamically: num.partitions"
    assert (await _replace(app, RESOURCE_BROKER, node, {"no.such.setting": "1"}, version))[0] == (
        ErrorCode.invalid_config
    )
    assert (await _replace(app, RESOURCE_BROKER, node, {"max.connections": "many"}, version))[0] == (
        ErrorCode.invalid_config
    )
    assert (await _replace(app, RESOURCE_BROKER, "99", {"max.connections": "10"}, version))[0] == (
        ErrorCode.invalid_request
    )
    assert app.broker_configs.of(node) == {}
    assert app.settings["num.partitions"] == 1


async def test_validate_only_checks_without_changing(tmp_path: Path) -> None:
    """AlterConfigs with validate_only answers NONE for a good value and keeps the setting as it was."""
    app = await open_app(tmp_path)
    assert await _replace(
        app, RESOURCE_BROKER, str(NODE_ID), {"max.connections": "10"}, validate_only=True
    ) == (
        0,
        None,
    )
    assert app.settings["max.connections"] == 2147483647
    assert not (tmp_path / BROKER_CONFIGS_FILE).exists()


async def test_dynamic_configs_are_kept_in_the_data_dir(tmp_path: Path) -> None:
    """What AlterConfigs set is in broker-configs.json, and a node reading it applies it again."""
    app = await open_app(tmp_path)
    assert await _replace(app, RESOURCE_BROKER, str(NODE_ID), {"log.segment.bytes": "1048576"}) == (0, None)
    settings = make_settings()
    reloaded = BrokerConfigs(tmp_path, settings, NODE_ID)
    await reloaded.load()
    assert reloaded.of(str(NODE_ID)) == {"log.segment.bytes": "1048576"}
    assert settings["log.segment.bytes"] == 1048576


async def test_alter_configs_replaces_a_topic_s_whole_set(tmp_path: Path) -> None:
    """AlterConfigs on a topic sets the given overrides and drops the others (Kafka's replace
    semantics), as IncrementalAlterConfigs' DELETE would."""
    app = await open_app(tmp_path)
    await app.topics.create("t", 1, configs={"retention.ms": "60000", "max.message.bytes": "2048"})
    assert await _replace(app, RESOURCE_TOPIC, "t", {"segment.bytes": "1048576"}, version=0) == (0, None)
    info = app.topics.get("t")
    assert info is not None and dict(info.configs) == {"segment.bytes": "1048576"}
    log = app.store.get("t", 0)
    assert log is not None and log.config.retention_ms == 604800000


async def test_alter_configs_replaces_a_group_s_whole_set(tmp_path: Path) -> None:
    """AlterConfigs on a group keeps only the configs it names."""
    app = await open_app(tmp_path)
    group = "g"
    heartbeat = [
        ("consumer.heartbeat.interval.ms", SET, "1000"),
        ("consumer.session.timeout.ms", SET, "9000"),
    ]
    assert await _incremental(app, RESOURCE_GROUP, group, heartbeat) == (0, None)
    assert await _replace(app, RESOURCE_GROUP, group, {"consumer.session.timeout.ms": "8000"}) == (0, None)
    value, source, _ = await _described(app, RESOURCE_GROUP, group, "consumer.heartbeat.interval.ms")
    assert (value, source) == ("5000", ConfigSource.DEFAULT_CONFIG)
    assert (await _described(app, RESOURCE_GROUP, group, "consumer.session.timeout.ms"))[0] == "8000"


async def test_altering_broker_configs_needs_cluster_alter_configs(tmp_path: Path) -> None:
    """Under the authorizer, a principal without Cluster ALTER_CONFIGS gets CLUSTER_AUTHORIZATION_FAILED
    from both APIs and nothing changes."""
    app, _authorizer = await secured_app(tmp_path, {}, [])
    node = str(NODE_ID)
    assert (await _replace(app, RESOURCE_BROKER, node, {"max.connections": "10"}))[0] == (
        ErrorCode.cluster_authorization_failed
    )
    assert (await _incremental(app, RESOURCE_BROKER, node, [("max.connections", SET, "10")]))[0] == (
        ErrorCode.cluster_authorization_failed
    )
    assert app.settings["max.connections"] == 2147483647
