"""OffsetFetch (key 9), versions 1-9.

- v1: one group, explicit topics; errors per partition only.
- v2: ``topics`` null = every partition the group has committed; a top-level error code.
- v3: throttle time.
- v5: ``committed_leader_epoch`` per partition.
- v6: flexible.
- v7: ``require_stable``: a partition a transaction holds a pending offset for (TxnOffsetCommit,
  until its marker) answers UNSTABLE_OFFSET_COMMIT (offset -1); such a fetch is answered after the
  writes already under way on the group's partition are durable, as Kafka serves it as a write.
- v8: several groups per request: ``groups[]`` in and out, an error per group.
- v9: per group ``member_id`` and ``member_epoch`` (KIP-848): for a consumer group a member that
  gives them must exist (UNKNOWN_MEMBER_ID) with its current epoch (STALE_MEMBER_EPOCH), the
  group's error; no member id and epoch -1 (admin clients) fetch without a check.

An unknown group is not an error: its partitions answer offset -1 (PROTOCOL.md §2.8). A group
error (its partition is loading, say) goes into each partition for v1, the top level for v2-7
and the group's entry for v8.

Authorization: Group DESCRIBE (else GROUP_AUTHORIZATION_FAILED); topics the principal
may not DESCRIBE are left out of an all-topics fetch and TOPIC_AUTHORIZATION_FAILED when named.
"""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, may_topic, require_named_group
from kcoord.apis.groups.offset_fetch_wire import decode_offset_fetch
from kcoord.coordinator.offsets import (
    OffsetFetchPartitionResult,
    OffsetFetchResponse,
    OffsetFetchTopic,
    OffsetFetchTopicResult,
)
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import EncodedResponse
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.protocol.repeated_requests import RepeatedRequests
from kcoord.protocol.response_cache import ResponseCache
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def _topics(raw: Any) -> list[OffsetFetchTopic] | None:
    if raw is None:
        return None
    if raw and type(raw[0]) is OffsetFetchTopic:
        return list(raw)  # the hand-written reader's (offset_fetch_wire); the list is the caller's
    return [OffsetFetchTopic(t.name, [int(i) for i in t.partition_indexes]) for t in raw]


def _fetch_one(
    ctx: RequestContext,
    groups: GroupService,
    authorizer: Authorizer,
    group_id: str,
    topics: list[OffsetFetchTopic] | None,
    stable: bool,
    member: tuple[str | None, int] = (None, -1),
) -> OffsetFetchResponse:
    """Group DESCRIBE; then topics the principal may not DESCRIBE are left out of an all-topics
    fetch, and answered TOPIC_AUTHORIZATION_FAILED per partition when named, as Kafka does."""
    require_named_group(ctx, authorizer, Op.DESCRIBE, group_id)
    if not authorizer.enabled:
        return groups.fetch_offsets(group_id, topics, stable, member)
    if topics is None:
        response = groups.fetch_offsets(group_id, None, stable, member)
        shown = [t for t in response.topics if may_topic(ctx, authorizer, Op.DESCRIBE, t.name)]
        return OffsetFetchResponse(response.group_id, shown, response.error_code)
    allowed = [t for t in topics if may_topic(ctx, authorizer, Op.DESCRIBE, t.name)]
    response = groups.fetch_offsets(group_id, allowed, stable, member)
    code = ErrorCode.topic_authorization_failed
    denied = [
        OffsetFetchTopicResult(
            t.name, [OffsetFetchPartitionResult(i, -1, -1, "", code) for i in t.partition_indexes]
        )
        for t in topics
        if t not in allowed
    ]
    return OffsetFetchResponse(response.group_id, [*response.topics, *denied], response.error_code)


def _group_error(group_id: str, code: ErrorCode) -> OffsetFetchResponse:
    return OffsetFetchResponse(group_id=group_id, topics=[], error_code=code)


def _legacy_body(
    response: OffsetFetchResponse, api_version: int, asked: list[OffsetFetchTopic] | None
) -> Any:
    if api_version >= 2 or response.error_code == ErrorCode.none:
        return {"topics": response.topics, "error_code": response.error_code}
    # v1 has no group-level error: copy it into every partition that was asked for.
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": i,
                        "committed_offset": -1,
                        "metadata": "",
                        "error_code": response.error_code,
                    }
                    for i in t.partition_indexes
                ],
            }
            for t in asked or []
        ]
    }


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    groups = getattr(request, "groups", None)
    if groups is not None:
        return {"groups": [{"group_id": g.group_id, "topics": [], "error_code": code} for g in groups]}
    topics = _topics(request.topics)
    body: dict[str, Any] = _legacy_body(
        _group_error(request.group_id, code), int(type(request).__version__), topics
    )
    return body


def api(groups: GroupService, *, authorizer: Authorizer) -> ApiSpec:
    handler = functools.partial(handle_offset_fetch, groups=groups, authorizer=authorizer)
    decoder = RepeatedRequests(ApiKey.OFFSET_FETCH, decode_offset_fetch)  # a consumer asks the same again
    return ApiSpec(ApiKey.OFFSET_FETCH, "OffsetFetch", 1, 9, handler, _error_response, decoder)


async def handle_offset_fetch(
    ctx: RequestContext, request: Any, *, groups: GroupService, authorizer: Authorizer
) -> Any:
    stable = bool(getattr(request, "require_stable", False))
    if ctx.api_version >= 8:
        answers = []
        for group in request.groups:
            topics = _topics(group.topics)
            member = (getattr(group, "member_id", None), int(getattr(group, "member_epoch", -1)))
            try:
                if stable:
                    await groups.offsets_settled(group.group_id)
                answers.append(_fetch_one(ctx, groups, authorizer, group.group_id, topics, stable, member))
            except KafkaError as exc:
                answers.append(_group_error(group.group_id, exc.code))
        return _encoded(ctx.api_version, answers, {"groups": answers})
    topics = _topics(request.topics)
    try:
        if stable:
            await groups.offsets_settled(request.group_id)
        response = _fetch_one(ctx, groups, authorizer, request.group_id, topics, stable)
    except KafkaError as exc:
        response = _group_error(request.group_id, exc.code)
    if ctx.api_version >= 2:
        return _encoded(ctx.api_version, [response], _legacy_body(response, ctx.api_version, topics))
    return _legacy_body(response, ctx.api_version, topics)


_ANSWERS = ResponseCache(ApiKey.OFFSET_FETCH)


def _encoded(api_version: int, answers: list[OffsetFetchResponse], body: Any) -> EncodedResponse:
    """Answers repeat until the group commits again: each distinct one is encoded once.

    v2+ only, where the body is exactly the groups' answers (v1 copies errors into partitions).
    """
    key = tuple([(a.group_id, a.error_code, _topics_key(a.topics)) for a in answers])
    known = _ANSWERS.get(api_version, key)
    if known is not None:
        return known
    codes = (
        code
        for a in answers
        for code in (a.error_code, *(p.error_code for t in a.topics for p in t.partitions))
        if code != ErrorCode.none
    )
    first_error = next(codes, ErrorCode.none)
    return _ANSWERS.encoded(api_version, key, body, first_error)


def _topics_key(topics: list[OffsetFetchTopicResult]) -> tuple[Any, ...]:
    return tuple(
        [
            (
                topic.name,
                tuple(
                    [
                        (
                            p.partition_index,
                            p.committed_offset,
                            p.committed_leader_epoch,
                            p.metadata,
                            p.error_code,
                        )
                        for p in topic.partitions
                    ]
                ),
            )
            for topic in topics
        ]
    )
