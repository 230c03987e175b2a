"""DeleteTopics v1-6: by name and by id, unknown and internal topics, delete.topic.enable."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.apis.broker.topic_app import TopicApp, call, open_app


async def _delete(app: TopicApp, version: int, names: list[str]) -> Any:
    if version >= 6:
        body: dict[str, Any] = {"topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]}
    else:
        body = {"topic_names": names}
    return await call(app, ApiKey.DELETE_TOPICS, version, body | {"timeout": 5000})


@pytest.mark.parametrize("version", range(1, 7))
async def test_deletes_by_name_at_every_version(tmp_path: Path, version: int) -> None:
    """Each served version deletes a named topic and its logs."""
    app = await open_app(tmp_path)
    info = await app.topics.create("gone", 2)
    response = await _delete(app, version, ["gone"])
    (result,) = response.responses
    assert (result.name, result.error_code) == ("gone", ErrorCode.none)
    assert getattr(result, "topic_id", info.topic_id) == info.topic_id
    assert app.topics.names() == [] and app.store.partitions() == []


async def test_v6_deletes_by_id_and_reports_unknown_ids(tmp_path: Path) -> None:
    """v6 names topics by id: a known id is deleted (name reported), an unknown one is UNKNOWN_TOPIC_ID."""
    app = await open_app(tmp_path)
    info = await app.topics.create("byid", 1)
    stranger = uuid.uuid4()
    body = {"topics": [{"name": None, "topic_id": info.topic_id}, {"name": None, "topic_id": stranger}]}
    response = await call(app, ApiKey.DELETE_TOPICS, 6, body | {"timeout": 0})
    assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [
        ("byid", info.topic_id, ErrorCode.none),
        (None, stranger, ErrorCode.unknown_topic_id),
    ]
    assert app.topics.names() == []


@pytest.mark.parametrize("version", [1, 5])
async def test_unknown_and_internal_topics_are_refused(tmp_path: Path, version: int) -> None:
    """An unknown topic is UNKNOWN_TOPIC_OR_PARTITION and the offsets topic INVALID_REQUEST."""
    app = await open_app(tmp_path)
    await app.topics.ensure_offsets_topic(1)
    response = await _delete(app, version, ["nope", "__consumer_offsets"])
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("nope", ErrorCode.unknown_topic_or_partition),
        ("__consumer_offsets", ErrorCode.invalid_request),
    ]
    assert app.topics.names() == ["__consumer_offsets"]


@pytest.mark.parametrize(
    ("version", "code"), [(2, ErrorCode.invalid_request), (3, ErrorCode.topic_deletion_disabled)]
)
async def test_deletion_can_be_disabled(tmp_path: Path, version: int, code: ErrorCode) -> None:
    """delete.topic.enable=false is TOPIC_DELETION_DISABLED from v3 and INVALID_REQUEST before."""
    app = await open_app(tmp_path, delete_topic_enable=False)
    await app.topics.create("kept", 1)
    response = await _delete(app, version, ["kept"])
    assert response.responses[0].error_code == code
    assert app.topics.names() == ["kept"]
