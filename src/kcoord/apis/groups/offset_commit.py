"""OffsetCommit (key 8), versions 2-9.

- v2: ``retention_time_ms`` (-1: the broker's offsets.retention.minutes); v0-1 are not served.
- v3: throttle time in the response.
- v5: ``retention_time_ms`` removed (retention is the broker's alone).
- v6: ``committed_leader_epoch`` per partition.
- v7: ``group_instance_id`` (static members).
- v8: flexible.
- v9: KIP-848: to a consumer group the generation is the member's epoch (STALE_MEMBER_EPOCH when
  it is not the current one); a generation to a missing group gets GROUP_ID_NOT_FOUND.

Checks run in Kafka's order (PROTOCOL.md §2.8) inside the group's shard; the response is released
once the commit records are durable. The handler's only wait is that durability (the outcome is
decided and the records queued first, and a commit's checks never read an earlier commit), so the
spec is ``pipelined``: commits pipelined on one connection join one write round.

Frames are read by :mod:`kcoord.apis.groups.offset_commit_wire` straight into the core's request
(kio's reader stays the fallback for a frame it declines).

Authorization: Group READ (else GROUP_AUTHORIZATION_FAILED), then Topic READ per topic
(else TOPIC_AUTHORIZATION_FAILED for its partitions, the others committed).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, may_topic, require_named_group
from kcoord.apis.groups.common import millis
from kcoord.apis.groups.offset_commit_wire import decode_offset_commit
from kcoord.coordinator.offsets import (
    OffsetCommitPartition,
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetCommitTopicResult,
)
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import EncodedResponse
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.protocol.response_cache import ResponseCache
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def commit_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    """Every requested partition answered ``code`` (OffsetCommit's and TxnOffsetCommit's shape)."""
    return {
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": code} for p in topic.partitions
                ],
            }
            for topic in request.topics
        ]
    }


def to_core(request: Any, api_version: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=request.group_id,
        generation_id_or_member_epoch=int(request.generation_id_or_member_epoch),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        retention_time_ms=millis(getattr(request, "retention_time", None)),
        api_version=api_version,
        topics=core_topics(request),
    )


def core_topics(request: Any) -> list[OffsetCommitTopic]:
    """The wire request's topics and partitions as the core's (OffsetCommit's and TxnOffsetCommit's)."""
    return [
        OffsetCommitTopic(
            name=topic.name,
            partitions=[
                OffsetCommitPartition(
                    partition_index=int(p.partition_index),
                    committed_offset=int(p.committed_offset),
                    committed_leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                    committed_metadata=p.committed_metadata,
                )
                for p in topic.partitions
            ],
        )
        for topic in request.topics
    ]


def api(groups: GroupService, *, authorizer: Authorizer) -> ApiSpec:
    handler = functools.partial(handle_offset_commit, groups=groups, authorizer=authorizer)
    return ApiSpec(
        ApiKey.OFFSET_COMMIT,
        "OffsetCommit",
        2,
        9,
        handler,
        commit_error_response,
        decode_offset_commit,
        pipelined=True,
    )


async def handle_offset_commit(
    ctx: RequestContext, request: Any, *, groups: GroupService, authorizer: Authorizer
) -> Any:
    api_version = ctx.header.api_version
    if not authorizer.enabled:  # require_named_group, inline: this runs for every commit
        if not request.group_id:
            raise KafkaError(ErrorCode.invalid_group_id)
        commit = request if isinstance(request, OffsetCommitRequest) else to_core(request, api_version)
        return _encoded(api_version, await groups.commit_offsets(commit))
    require_named_group(ctx, authorizer, Op.READ, request.group_id)
    commit = request if isinstance(request, OffsetCommitRequest) else to_core(request, api_version)
    return _encoded(api_version, await commit_readable(ctx, authorizer, commit, groups.commit_offsets))


class _Commit(Protocol):
    topics: list[OffsetCommitTopic]


_C = TypeVar("_C", bound=_Commit)


async def commit_readable(
    ctx: RequestContext,
    authorizer: Authorizer,
    commit: _C,
    write: Callable[[_C], Awaitable[OffsetCommitResponse]],
) -> OffsetCommitResponse:
    """``write`` the topics the principal may READ; the others are answered TOPIC_AUTHORIZATION_FAILED."""
    allowed = [may_topic(ctx, authorizer, Op.READ, t.name) for t in commit.topics]
    denied = [t for t, ok in zip(commit.topics, allowed, strict=True) if not ok]
    commit.topics = [t for t, ok in zip(commit.topics, allowed, strict=True) if ok]
    results = (await write(commit)).topics if commit.topics else []
    return OffsetCommitResponse([*results, *(_denied(t) for t in denied)])


def _denied(topic: OffsetCommitTopic) -> OffsetCommitTopicResult:
    """TOPIC_AUTHORIZATION_FAILED for every partition of a topic the principal may not READ."""
    code = ErrorCode.topic_authorization_failed
    return OffsetCommitTopicResult(
        topic.name, [OffsetCommitPartitionResult(p.partition_index, code) for p in topic.partitions]
    )


_ANSWERS = ResponseCache(ApiKey.OFFSET_COMMIT)


def _encoded(api_version: int, response: OffsetCommitResponse) -> EncodedResponse:
    """An answer is only topic names, partition indexes and error codes: each distinct one is encoded once."""
    answered = response.topics
    if len(answered) == 1 and len(answered[0].partitions) == 1:  # one partition: most commits
        topic = answered[0]
        p = topic.partitions[0]
        code = p.error_code
        key = ((topic.name, ((p.partition_index, code),)),)
        return _ANSWERS.encoded(api_version, key, response, code)
    topics: list[tuple[str, tuple[tuple[int, ErrorCode], ...]]] = []
    first_error = _NO_ERROR
    for topic in answered:  # loops, not generators: this runs for every commit
        partitions: list[tuple[int, ErrorCode]] = []
        for p in topic.partitions:
            code = p.error_code
            partitions.append((p.partition_index, code))
            if code and not first_error:
                first_error = code
        topics.append((topic.name, tuple(partitions)))
    return _ANSWERS.encoded(api_version, tuple(topics), response, first_error)


_NO_ERROR = ErrorCode.none
