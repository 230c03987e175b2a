"""CreateTopics v2-7: per-topic results and errors, validate_only, assignments, v5+ details."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.cluster.topic_configs import ConfigSource
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.file_store import FileLogStore
from tests.apis.broker.topic_app import NODE_ID, TopicApp, call, count_catalogue_writes, open_app


def _topic(
    name: str,
    partitions: int = 1,
    factor: int = 1,
    configs: dict[str, str | None] | None = None,
    assignments: list[tuple[int, list[int]]] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": factor,
        "assignments": [{"partition_index": i, "broker_ids": ids} for i, ids in assignments or []],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


async def _create(app: TopicApp, version: int, *topics: dict[str, Any], validate_only: bool = False) -> Any:
    return await call(
        app,
        ApiKey.CREATE_TOPICS,
        version,
        {"topics": list(topics), "timeout": 5000, "validate_only": validate_only},
    )


@pytest.mark.parametrize("version", range(2, 8))
async def test_creates_topics_at_every_version(tmp_path: Path, version: int) -> None:
    """Each served version creates the topic and reports success with no message."""
    app = await open_app(tmp_path)
    response = await _create(app, version, _topic("orders", 3))
    (result,) = response.topics
    assert (result.name, result.error_code, result.error_message) == ("orders", ErrorCode.none, None)
    info = app.topics.get("orders")
    assert info is not None and info.partitions == 3


async def test_v7_reports_id_partitions_factor_and_configs(tmp_path: Path) -> None:
    """v7 results carry the topic id, the resolved counts and every config with its source."""
    app = await open_app(tmp_path, num_partitions=4)
    response = await _create(app, 7, _topic("orders", -1, -1, configs={"retention.ms": "1000"}))
    (result,) = response.topics
    info = app.topics.get("orders")
    assert info is not None
    assert (result.topic_id, result.num_partitions, result.replication_factor) == (info.topic_id, 4, 1)
    configs = {c.name: c for c in result.configs or ()}
    assert configs["retention.ms"].value == "1000"
    assert configs["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG


async def test_errors_are_per_topic_with_messages(tmp_path: Path) -> None:
    """One bad topic fails alone, each with its own code and a message; the good one is created."""
    app = await open_app(tmp_path)
    await app.topics.create("exists", 1)
    response = await _create(
        app,
        5,
        _topic("exists"),
        _topic("bad name"),
        _topic("zero", 0),
        _topic("replicated", 1, 3),
        _topic("configured", 1, configs={"nonsense": "1"}),
        _topic("fine"),
        _topic("__consumer_offsets"),
    )
    codes = {r.name: r.error_code for r in response.topics}
    assert codes == {
        "exists": ErrorCode.topic_already_exists,
        "bad name": ErrorCode.invalid_topic_exception,
        "zero": ErrorCode.invalid_partitions,
        "replicated": ErrorCode.invalid_replication_factor,
        "configured": ErrorCode.invalid_config,
        "fine": ErrorCode.none,
        "__consumer_offsets": ErrorCode.invalid_request,
    }
    failed = [r for r in response.topics if r.error_code != ErrorCode.none]
    assert all(r.error_message for r in failed)
    assert all((r.num_partitions, r.replication_factor, r.configs) == (-1, -1, None) for r in failed)
    assert app.topics.names() == ["exists", "fine"]


async def test_validate_only_creates_nothing(tmp_path: Path) -> None:
    """validate_only reports success for a valid topic, errors for a bad one, and creates neither."""
    app = await open_app(tmp_path)
    response = await _create(app, 7, _topic("ok", 2), _topic("bad", 0), validate_only=True)
    assert [(r.name, r.error_code) for r in response.topics] == [
        ("ok", ErrorCode.none),
        ("bad", ErrorCode.invalid_partitions),
    ]
    assert response.topics[0].num_partitions == 2
    assert app.topics.names() == []


async def test_duplicate_names_fail_once_and_create_nothing(tmp_path: Path) -> None:
    """A name listed twice gets one INVALID_REQUEST result and is not created."""
    app = await open_app(tmp_path)
    response = await _create(app, 4, _topic("twice"), _topic("twice", 2), _topic("once"))
    assert [(r.name, r.error_code) for r in response.topics] == [
        ("twice", ErrorCode.invalid_request),
        ("once", ErrorCode.none),
    ]
    assert app.topics.names() == ["once"]


async def test_manual_assignment_to_this_node_sets_partition_count(tmp_path: Path) -> None:
    """Assignments putting every partition on this node create that many partitions."""
    app = await open_app(tmp_path)
    response = await _create(app, 4, _topic("manual", -1, -1, assignments=[(1, [NODE_ID]), (0, [NODE_ID])]))
    assert response.topics[0].error_code == ErrorCode.none
    info = app.topics.get("manual")
    assert info is not None and info.partitions == 2


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        (_topic("t", -1, -1, assignments=[(0, [NODE_ID + 1])]), ErrorCode.invalid_replica_assignment),
        (_topic("t", -1, -1, assignments=[(0, [NODE_ID, NODE_ID])]), ErrorCode.invalid_replica_assignment),
        (
            _topic("t", -1, -1, assignments=[(0, [NODE_ID]), (2, [NODE_ID])]),
            ErrorCode.invalid_replica_assignment,
        ),
        (_topic("t", 1, -1, assignments=[(0, [NODE_ID])]), ErrorCode.invalid_request),
    ],
)
async def test_bad_assignments_are_refused(tmp_path: Path, topic: dict[str, Any], code: ErrorCode) -> None:
    """Other brokers, several replicas, gaps, or counts given alongside assignments are refused."""
    app = await open_app(tmp_path)
    response = await _create(app, 4, topic)
    assert response.topics[0].error_code == code
    assert app.topics.names() == []


async def test_one_request_of_many_topics_is_one_round_with_one_catalogue_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 topics x 4 partitions in one CreateTopics: every one answered and created, one catalogue write."""
    app = await open_app(tmp_path, FileLogStore(tmp_path / "data"))
    try:
        writes = count_catalogue_writes(monkeypatch)
        names = [f"bulk-{index:03}" for index in range(100)]
        response = await _create(app, 7, *(_topic(name, 4) for name in names), _topic("bad name"))
        assert writes == [100]
        assert [result.name for result in response.topics] == [*names, "bad name"]
        for result in response.topics[:-1]:
            info = app.topics.get(result.name)
            assert info is not None and result.error_code == ErrorCode.none
            assert (result.topic_id, result.num_partitions) == (info.topic_id, 4)
            assert all(app.topics.partition_log(result.name, p) is not None for p in range(4))
        assert response.topics[-1].error_code == ErrorCode.invalid_topic_exception
        assert (tmp_path / "data" / "bulk-099-3").is_dir()
    finally:
        await app.store.close()
