"""IncrementalAlterConfigs for TOPIC resources on one node: SET, DELETE, APPEND, SUBTRACT, the
errors per resource, persistence in topics.json, and the logs taking the new config at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.apis.broker.describe_configs import RESOURCE_TOPIC
from kcoord.cluster.topic_configs import APPEND, DELETE, SET, SUBTRACT, ConfigSource
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.file_store import FileLogStore
from tests.apis.broker.topic_app import TopicApp, call, open_app

Operation = tuple[str, int, str | None]


async def _alter(
    app: TopicApp, resources: list[tuple[str, list[Operation]]], validate_only: bool = False, version: int = 1
) -> list[tuple[str, int]]:
    body = {
        "resources": [
            {
                "resource_type": RESOURCE_TOPIC,
                "resource_name": name,
                "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in operations],
            }
            for name, operations in resources
        ],
        "validate_only": validate_only,
    }
    answer = await call(app, ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body)
    return [(r.resource_name, int(r.error_code)) for r in answer.responses]


async def _described(app: TopicApp, name: str, key: str) -> tuple[str | None, int]:
    body = {
        "resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": name, "configuration_keys": [key]}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    answer: Any = await call(app, ApiKey.DESCRIBE_CONFIGS, 4, body)
    (entry,) = answer.results[0].configs
    return entry.value, int(entry.config_source)


@pytest.mark.parametrize("version", [0, 1])
async def test_set_and_delete_change_what_describe_configs_and_the_logs_see(
    tmp_path: Path, version: int
) -> None:
    """SET makes an override (DYNAMIC_TOPIC_CONFIG) that the topic's logs use at once; DELETE takes
    it back to the node's default."""
    app = await open_app(tmp_path)
    await app.topics.create("t", 2)
    ops: list[Operation] = [("retention.ms", SET, "60000"), ("max.message.bytes", SET, "2048")]
    assert await _alter(app, [("t", ops)], version=version) == [("t", ErrorCode.none)]
    assert await _described(app, "t", "retention.ms") == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert app.topics.max_message_bytes(app.topics.get("t")) == 2048  # type: ignore[arg-type]
    for partition in range(2):
        log = app.store.get("t", partition)
        assert log is not None and log.config.retention_ms == 60000

    assert await _alter(app, [("t", [("retention.ms", DELETE, None)])]) == [("t", ErrorCode.none)]
    assert await _described(app, "t", "retention.ms") == ("604800000", ConfigSource.DEFAULT_CONFIG)
    log = app.store.get("t", 0)
    assert log is not None and log.config.retention_ms == 604800000
    assert dict(app.topics.get("t").configs) == {"max.message.bytes": "2048"}  # type: ignore[union-attr]


async def test_append_and_subtract_edit_a_list_config(tmp_path: Path) -> None:
    """APPEND adds to the current cleanup.policy (the default ``delete`` at first), SUBTRACT removes."""
    app = await open_app(tmp_path)
    await app.topics.create("t", 1)
    assert await _alter(app, [("t", [("cleanup.policy", APPEND, "compact")])]) == [("t", 0)]
    assert (await _described(app, "t", "cleanup.policy"))[0] == "delete,compact"
    assert await _alter(app, [("t", [("cleanup.policy", SUBTRACT, "delete")])]) == [("t", 0)]
    assert (await _described(app, "t", "cleanup.policy"))[0] == "compact"


async def test_errors_are_per_resource_and_change_nothing(tmp_path: Path) -> None:
    """Unknown names, bad values, APPEND to a non-list, a name twice, an unknown or internal topic
    each fail their own resource only; the good resource in the same request is applied."""
    app = await open_app(tmp_path)
    await app.topics.create("t", 1, configs={"retention.ms": "1000"})
    await app.topics.create("ok", 1)
    await app.topics.ensure_offsets_topic(1)
    answers = await _alter(
        app,
        [
            ("t", [("no.such.config", SET, "1")]),
            ("t", [("retention.ms", SET, "soon")]),
            ("t", [("retention.ms", APPEND, "5")]),
            ("t", [("retention.ms", SET, "5"), ("retention.ms", DELETE, None)]),
            ("missing", [("retention.ms", SET, "5")]),
            ("__consumer_offsets", [("retention.ms", SET, "5")]),
            ("ok", [("segment.ms", SET, "3600000")]),
        ],
    )
    assert [code for _, code in answers] == [
        ErrorCode.invalid_config,
        ErrorCode.invalid_config,
        ErrorCode.invalid_config,
        ErrorCode.invalid_request,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_request,
        ErrorCode.none,
    ]
    assert dict(app.topics.get("t").configs) == {"retention.ms": "1000"}  # type: ignore[union-attr]
    assert dict(app.topics.get("ok").configs) == {"segment.ms": "3600000"}  # type: ignore[union-attr]


async def test_validate_only_changes_nothing_and_changes_survive_a_restart(tmp_path: Path) -> None:
    """validate_only checks without storing; a real change is in topics.json, so a node restarted
    on the same data directory keeps it and gives it to the reopened logs."""
    data = tmp_path / "data"
    app = await open_app(tmp_path, FileLogStore(data))
    await app.topics.create("t", 1)
    assert await _alter(app, [("t", [("retention.ms", SET, "5000")])], validate_only=True) == [("t", 0)]
    assert dict(app.topics.get("t").configs) == {}  # type: ignore[union-attr]
    assert await _alter(app, [("t", [("retention.ms", SET, "5000")])]) == [("t", 0)]
    await app.store.close()

    again = await open_app(tmp_path, FileLogStore(data))
    try:
        assert dict(again.topics.get("t").configs) == {"retention.ms": "5000"}  # type: ignore[union-attr]
        log = again.store.get("t", 0)
        assert log is not None and log.config.retention_ms == 5000
    finally:
        await again.store.close()
