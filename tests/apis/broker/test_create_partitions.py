"""CreatePartitions v0-3: growth, validation, assignments, internal topics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.file_store import FileLogStore
from tests.apis.broker.topic_app import NODE_ID, TopicApp, call, count_catalogue_writes, open_app


def _grow(name: str, count: int, assignments: list[list[int]] | None = None) -> dict[str, Any]:
    shaped = None if assignments is None else [{"broker_ids": ids} for ids in assignments]
    return {"name": name, "count": count, "assignments": shaped}


async def _request(app: TopicApp, version: int, *topics: dict[str, Any], validate_only: bool = False) -> Any:
    body = {"topics": list(topics), "timeout": 5000, "validate_only": validate_only}
    return await call(app, ApiKey.CREATE_PARTITIONS, version, body)


async def _app(tmp_path: Path) -> TopicApp:
    app = await open_app(tmp_path)
    await app.topics.create("t", 2)
    return app


@pytest.mark.parametrize("version", range(4))
async def test_grows_topic_at_every_version(tmp_path: Path, version: int) -> None:
    """Each served version grows the topic and answers with no error."""
    app = await _app(tmp_path)
    response = await _request(app, version, _grow("t", 5))
    assert [(r.name, r.error_code) for r in response.results] == [("t", ErrorCode.none)]
    assert app.topics.partition_log("t", 4) is not None


async def test_per_topic_errors(tmp_path: Path) -> None:
    """Not growing is INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, each with a message."""
    app = await _app(tmp_path)
    response = await _request(app, 3, _grow("t", 2), _grow("missing", 3))
    assert [(r.name, r.error_code) for r in response.results] == [
        ("t", ErrorCode.invalid_partitions),
        ("missing", ErrorCode.unknown_topic_or_partition),
    ]
    assert all(r.error_message for r in response.results)


async def test_validate_only_does_not_grow(tmp_path: Path) -> None:
    """validate_only answers success without adding partitions."""
    app = await _app(tmp_path)
    response = await _request(app, 1, _grow("t", 4), validate_only=True)
    assert response.results[0].error_code == ErrorCode.none
    info = app.topics.get("t")
    assert info is not None and info.partitions == 2


async def test_assignments_on_this_node_are_accepted(tmp_path: Path) -> None:
    """One [this node] assignment per new partition is accepted."""
    app = await _app(tmp_path)
    response = await _request(app, 2, _grow("t", 4, [[NODE_ID], [NODE_ID]]))
    assert response.results[0].error_code == ErrorCode.none


@pytest.mark.parametrize("assignments", [[[NODE_ID]], [[NODE_ID], [NODE_ID + 1]], [[NODE_ID], []]])
async def test_bad_assignments_are_invalid_replica_assignment(
    tmp_path: Path, assignments: list[list[int]]
) -> None:
    """Too few assignments, another broker or an empty list are INVALID_REPLICA_ASSIGNMENT."""
    app = await _app(tmp_path)
    response = await _request(app, 2, _grow("t", 4, assignments))
    assert response.results[0].error_code == ErrorCode.invalid_replica_assignment
    info = app.topics.get("t")
    assert info is not None and info.partitions == 2


async def test_duplicates_and_internal_topics_are_invalid_requests(tmp_path: Path) -> None:
    """A topic listed twice, or the offsets topic, is INVALID_REQUEST and does not grow."""
    app = await _app(tmp_path)
    await app.topics.ensure_offsets_topic(2)
    response = await _request(app, 3, _grow("t", 3), _grow("t", 4), _grow("__consumer_offsets", 9))
    assert [(r.name, r.error_code) for r in response.results] == [
        ("t", ErrorCode.invalid_request),
        ("__consumer_offsets", ErrorCode.invalid_request),
    ]
    assert await app.topics.ensure_offsets_topic(2) == 2


async def test_one_request_grows_many_topics_answering_each_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """50 topics grown in one CreatePartitions: each answered in request order and grown, with one
    catalogue write for all of them."""
    app = await open_app(tmp_path, FileLogStore(tmp_path / "data"))
    try:
        names = [f"grow-{index:02}" for index in range(50)]
        for name in names:
            await app.topics.create(name, 1)
        writes = count_catalogue_writes(monkeypatch)
        response = await _request(app, 3, *(_grow(name, 3) for name in names), _grow("missing", 2))
        assert writes == [50]
        assert [(r.name, r.error_code) for r in response.results] == [
            *((name, ErrorCode.none) for name in names),
            ("missing", ErrorCode.unknown_topic_or_partition),
        ]
        for name in names:
            info = app.topics.get(name)
            assert info is not None and info.partitions == 3
            assert app.topics.partition_log(name, 2) is not None
    finally:
        await app.store.close()
