"""DescribeConfigs v1-4 for topics and for this broker: values, sources, synonyms, filters, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.apis.broker.describe_configs import RESOURCE_BROKER, RESOURCE_TOPIC
from kcoord.cluster.topic_configs import TOPIC_CONFIGS, ConfigSource, ConfigType
from kcoord.config.dynamic import DYNAMIC_BROKER_CONFIGS
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.apis.broker.topic_app import NODE_ID, TopicApp, call, open_app


async def _describe(
    app: TopicApp,
    version: int,
    resources: list[tuple[int, str, list[str] | None]],
    synonyms: bool = False,
    documentation: bool = False,
) -> Any:
    body = {
        "resources": [
            {"resource_type": t, "resource_name": n, "configuration_keys": keys} for t, n, keys in resources
        ],
        "include_synonyms": synonyms,
        "include_documentation": documentation,
    }
    return await call(app, ApiKey.DESCRIBE_CONFIGS, version, body)


async def _app(tmp_path: Path) -> TopicApp:
    app = await open_app(tmp_path, log_retention_bytes=123456)
    await app.topics.create("t", 1, configs={"retention.ms": "1000"})
    return app


@pytest.mark.parametrize("version", range(1, 5))
async def test_topic_configs_show_override_setting_and_default_sources(tmp_path: Path, version: int) -> None:
    """A topic lists every topic config: overrides, node settings and defaults each with their source."""
    app = await _app(tmp_path)
    response = await _describe(app, version, [(RESOURCE_TOPIC, "t", None)])
    (result,) = response.results
    assert result.error_code == ErrorCode.none
    configs = {c.name: c for c in result.configs}
    assert set(configs) == set(TOPIC_CONFIGS)
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
        "1000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert (configs["retention.bytes"].value, configs["retention.bytes"].config_source) == (
        "123456",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert (configs["cleanup.policy"].value, configs["cleanup.policy"].config_source) == (
        "delete",
        ConfigSource.DEFAULT_CONFIG,
    )
    assert all(c.synonyms == () and not c.read_only and not c.is_sensitive for c in result.configs)


async def test_key_filter_synonyms_and_documentation(tmp_path: Path) -> None:
    """Listed keys only; synonyms most specific first; v3+ types and documentation when asked."""
    app = await _app(tmp_path)
    response = await _describe(
        app,
        4,
        [(RESOURCE_TOPIC, "t", ["retention.ms", "retention.bytes"])],
        synonyms=True,
        documentation=True,
    )
    configs = {c.name: c for c in response.results[0].configs}
    assert set(configs) == {"retention.ms", "retention.bytes"}
    assert [(s.name, s.value, s.source) for s in configs["retention.ms"].synonyms] == [
        ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG),
    ]
    assert [(s.name, s.value, s.source) for s in configs["retention.bytes"].synonyms] == [
        ("log.retention.bytes", "123456", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.bytes", "-1", ConfigSource.DEFAULT_CONFIG),
    ]
    assert configs["retention.ms"].config_type == ConfigType.LONG
    assert configs["retention.ms"].documentation


async def test_broker_resource_lists_node_settings(tmp_path: Path) -> None:
    """The node (by its id) lists its settings with where each came from, only the dynamic broker
    configs writable; the cluster default (the empty name) lists no setting until one is set."""
    app = await _app(tmp_path)
    response = await _describe(app, 4, [(RESOURCE_BROKER, str(NODE_ID), None), (RESOURCE_BROKER, "", None)])
    node_result, default_result = response.results
    assert (default_result.error_code, list(default_result.configs)) == (ErrorCode.none, [])
    for result in [node_result]:
        assert result.error_code == ErrorCode.none
        configs = {c.name: c for c in result.configs}
        assert configs["node.id"].value == str(NODE_ID)
        assert (configs["log.retention.bytes"].value, configs["log.retention.bytes"].config_source) == (
            "123456",
            ConfigSource.STATIC_BROKER_CONFIG,
        )
        assert configs["num.partitions"].config_source == ConfigSource.DEFAULT_CONFIG
        assert configs["auto.create.topics.enable"].value == "true"
        assert configs["auto.create.topics.enable"].config_type == ConfigType.BOOLEAN
        assert {c.name for c in result.configs if not c.read_only} == DYNAMIC_BROKER_CONFIGS


async def test_broker_secrets_are_sensitive_and_never_returned(tmp_path: Path) -> None:
    """As Kafka does for password configs, a set secret is sensitive with a null value (its synonyms
    too), and the storage URL comes without its password."""
    app = await open_app(
        tmp_path,
        ssl_key_password="hunter2-pw",
        kcoord_storage_url="postgresql://kcoord:s3cret-pw@127.0.0.1:5432/kc",
    )
    response = await _describe(app, 4, [(RESOURCE_BROKER, str(NODE_ID), None)], synonyms=True)
    configs = {c.name: c for c in response.results[0].configs}
    password = configs["ssl.key.password"]
    assert (password.value, password.is_sensitive, password.config_type) == (None, True, ConfigType.PASSWORD)
    assert [s.value for s in password.synonyms] == [None, None]
    assert configs["ssl.keystore.key"].is_sensitive and configs["ssl.keystore.key"].value is None
    assert configs["kcoord.storage.url"].value == "postgresql://kcoord:[hidden]@127.0.0.1:5432/kc"
    assert not configs["kcoord.storage.url"].is_sensitive and not configs["num.partitions"].is_sensitive
    shown = repr(response)
    assert "hunter2-pw" not in shown and "s3cret-pw" not in shown


async def test_resource_errors_are_per_resource(tmp_path: Path) -> None:
    """Unknown and illegal topics, another broker id and unsupported types fail only their own resource."""
    app = await _app(tmp_path)
    response = await _describe(
        app,
        2,
        [
            (RESOURCE_TOPIC, "missing", None),
            (RESOURCE_TOPIC, "bad name", None),
            (RESOURCE_BROKER, str(NODE_ID + 1), None),
            (8, str(NODE_ID), None),
            (RESOURCE_TOPIC, "t", ["segment.bytes"]),
        ],
    )
    assert [r.error_code for r in response.results] == [
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_topic_exception,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.none,
    ]
    assert all(r.error_message and r.configs == () for r in response.results[:4])
    assert [c.name for c in response.results[4].configs] == ["segment.bytes"]
