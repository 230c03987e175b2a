"""Answers to Metadata requests naming a few topics are encoded once and follow every catalogue change."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, cast

from kcoord.apis.broker.metadata_answers import NamedTopicsAnswers
from kcoord.cluster.topic_manager import TopicInfo, TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import EncodedResponse, RequestHeader, build, request_class
from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import ConnectionInfo, RequestContext
from tests.apis.broker.topic_app import TopicApp, call, open_app

ZERO = uuid.UUID(int=0)


def _body(names: list[str], auto: bool = False) -> dict[str, Any]:
    return {
        "topics": [{"name": name, "topic_id": ZERO} for name in names],
        "allow_auto_topic_creation": auto,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


async def _raw_answer(app: TopicApp, version: int, names: list[str]) -> Any:
    """What the handler returns (a mapping, or an encoded answer) for a request naming ``names``."""
    request_cls = request_class(ApiKey.METADATA, version)
    assert request_cls is not None
    spec = app.registry.get(ApiKey.METADATA)
    assert spec is not None
    header = RequestHeader(ApiKey.METADATA, version, 1, "named-answers")
    ctx = RequestContext(header=header, connection=ConnectionInfo(1, "127.0.0.1", 50000))
    return await spec.handler(ctx, build(request_cls, _body(names)))


async def test_a_repeated_request_gets_the_same_encoded_answer(tmp_path: Path) -> None:
    """The second identical request is answered with the bytes encoded for the first."""
    app = await open_app(tmp_path)
    await app.topics.create("orders", 3)
    first = await _raw_answer(app, 12, ["orders"])
    second = await _raw_answer(app, 12, ["orders"])
    assert isinstance(first, EncodedResponse) and second is first
    other_version = await _raw_answer(app, 9, ["orders"])
    assert other_version is not first


async def test_answers_follow_growth_deletion_and_creation(tmp_path: Path) -> None:
    """A cached answer is not served once its topic grew or went; an error answer is never cached."""
    app = await open_app(tmp_path)
    await app.topics.create("orders", 1)
    assert len((await call(app, ApiKey.METADATA, 12, _body(["orders"]))).topics[0].partitions) == 1
    await app.topics.add_partitions("orders", 4)
    assert len((await call(app, ApiKey.METADATA, 12, _body(["orders"]))).topics[0].partitions) == 4
    await app.topics.delete("orders")
    gone = await call(app, ApiKey.METADATA, 12, _body(["orders"]))
    assert gone.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    await app.topics.create("orders", 2)
    back = await call(app, ApiKey.METADATA, 12, _body(["orders"]))
    assert back.topics[0].error_code == ErrorCode.none and len(back.topics[0].partitions) == 2


async def test_auto_created_topics_are_answered_afresh(tmp_path: Path) -> None:
    """A request that auto-creates its topic is not cached as the answer it had before creation."""
    app = await open_app(tmp_path, num_partitions=2)
    created = await call(app, ApiKey.METADATA, 12, _body(["fresh"], auto=True))
    again = await call(app, ApiKey.METADATA, 12, _body(["fresh"], auto=True))
    assert created.topics[0].error_code == ErrorCode.none == again.topics[0].error_code
    assert len(again.topics[0].partitions) == 2


class _Catalogue:
    """A topic catalogue whose answers the test changes without telling any listener."""

    def __init__(self, infos: dict[str, TopicInfo]) -> None:
        self.infos = infos

    def add_listener(self, _listener: Any) -> None:
        return None

    def get(self, name: str) -> TopicInfo | None:
        return self.infos.get(name)


def test_an_answer_is_dropped_once_its_topic_is_replaced_unannounced() -> None:
    """A kept answer whose topic the catalogue no longer holds (not yet announced) is not served."""
    info = TopicInfo("orders", uuid.uuid4(), 1)
    catalogue = _Catalogue({"orders": info})
    answers = NamedTopicsAnswers(cast(TopicManager, catalogue))
    body = {
        "throttle_time": 0,
        "brokers": [],
        "cluster_id": "c",
        "controller_id": 0,
        "topics": [
            {"error_code": ErrorCode.none, "name": "orders", "topic_id": info.topic_id, "partitions": []}
        ],
    }
    kept = answers.keep("key", 12, body, answers.generation)
    assert isinstance(kept, EncodedResponse) and answers.get("key") is kept
    catalogue.infos = {}
    assert answers.get("key") is None and len(answers) == 0


def test_an_answer_with_an_error_or_built_across_a_change_is_not_kept() -> None:
    """Only error-free answers built while the catalogue stood still are kept."""
    catalogue = _Catalogue({})
    answers = NamedTopicsAnswers(cast(TopicManager, catalogue))
    failed = {
        "brokers": [],
        "topics": [{"error_code": ErrorCode.unknown_topic_or_partition, "name": "x", "partitions": []}],
    }
    assert answers.keep("failed", 12, failed, answers.generation) is failed
    stale = {"brokers": [], "cluster_id": "c", "controller_id": 0, "topics": []}
    assert answers.keep("stale", 12, stale, answers.generation - 1) is stale
    assert len(answers) == 0
