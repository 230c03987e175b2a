"""DeleteTopics (key 20), versions 1-6.

- v1: topic names and a timeout; per-topic error codes; throttle_time.
- v2: no change.  v3: TOPIC_DELETION_DISABLED when ``delete.topic.enable`` is off (before v3
  that is INVALID_REQUEST, which older clients understand).
- v4: flexible.  v5: per-topic error_message.
- v6: topics may be named by id (name null); results carry the topic id.

Internal topics (``__consumer_offsets``) are refused with INVALID_REQUEST. A topic's logs are
deleted before the response is sent, so ``timeout`` never expires.

Authorization: Topic DELETE per topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid
from typing import Any

from kcoord.apis.access import Op, may_topic
from kcoord.apis.wiring import own_api
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["handle_delete_topics"]

_ZERO_UUID = uuid.UUID(int=0)


def _requested(request: Any) -> list[tuple[str | None, uuid.UUID]]:
    """(name, id) per requested topic; v1-5 name topics only."""
    names = getattr(request, "topic_names", None)
    if names is not None:
        return [(name, _ZERO_UUID) for name in names]
    return [(t.name, t.topic_id or _ZERO_UUID) for t in request.topics]


def _result(name: str | None, topic_id: uuid.UUID, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "topic_id": topic_id, "error_code": code, "error_message": message}


async def _delete_one(
    ctx: RequestContext,
    topics: TopicManager,
    authorizer: Authorizer,
    enabled: bool,
    name: str | None,
    topic_id: uuid.UUID,
) -> dict[str, Any]:
    if name is None:
        info = topics.get_by_id(topic_id)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_id, f"Topic id {topic_id} does not exist.")
        name = info.name
    if not may_topic(ctx, authorizer, Op.DELETE, name):
        raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
    if not enabled:
        code = ErrorCode.topic_deletion_disabled if ctx.api_version >= 3 else ErrorCode.invalid_request
        raise KafkaError(code, "Topic deletion is disabled (delete.topic.enable=false).")
    deleted = await topics.delete(name)
    return _result(deleted.name, deleted.topic_id, ErrorCode.none, None)


def delete_topics_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "responses": [_result(name or "", topic_id, code, None) for name, topic_id in _requested(request)],
    }


async def handle_delete_topics(
    ctx: RequestContext, request: Any, *, topics: TopicManager, enabled: bool, authorizer: Authorizer
) -> dict[str, Any]:
    """``enabled``: ``delete.topic.enable``."""
    results: list[dict[str, Any]] = []
    for name, topic_id in _requested(request):
        try:
            results.append(await _delete_one(ctx, topics, authorizer, enabled, name, topic_id))
        except KafkaError as exc:
            shown_name = name if name is not None or ctx.api_version >= 6 else ""
            results.append(_result(shown_name, topic_id, exc.code, exc.message))
    return {"throttle_time": 0, "responses": results}


api = own_api(ApiKey.DELETE_TOPICS, "DeleteTopics", 1, 6, handle_delete_topics, delete_topics_error_response)
