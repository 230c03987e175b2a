"""What the three share group offset APIs share: the parts that serve them (one edge object, so
their handlers take one argument), the group must be a share group (and, to change its offsets,
have no member), and topics are named, each checked against the topic catalogue and the caller's
rights on it."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kcoord.apis.access import Op, may_topic, require_group
from kcoord.apis.wiring import DeclaredApi
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.runtime.group_service import GroupService
from kcoord.runtime.share_partition_leader import SharePartitionLeader
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext
from kcoord.storage.api import TopicInfo

TopicChange = Callable[
    ["ShareOffsetsEdge", str, Any, "TopicInfo | None", "ErrorCode | None"], Awaitable[dict[str, Any]]
]
"""``(edge, group id, requested topic, its info, why it may not be answered) -> its entry of the
response``: what AlterShareGroupOffsets or DeleteShareGroupOffsets does to one topic."""


@dataclass(frozen=True, slots=True)
class ShareOffsetsEdge:
    """What the share group offset APIs are served by: the group service (is it a share group,
    has it members), the share partition leader (the partitions' state), the topic catalogue
    and the authorizer."""

    groups: GroupService
    leader: SharePartitionLeader
    topics: TopicManager
    authorizer: Authorizer


class ShareOffsetsApi(DeclaredApi):
    """A share group offset API: its handler takes the :class:`ShareOffsetsEdge`."""

    __slots__ = ()

    def __call__(
        self,
        groups: GroupService,
        leader: SharePartitionLeader,
        topics: TopicManager,
        *,
        authorizer: Authorizer,
    ) -> ApiSpec:
        return self.bind(edge=ShareOffsetsEdge(groups, leader, topics, authorizer))


def change_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    """AlterShareGroupOffsets' and DeleteShareGroupOffsets' answer of a failed request."""
    return {"throttle_time": 0, "error_code": code, "responses": []}


def change_api(key: ApiKey, name: str, group_op: Op, change: TopicChange) -> ShareOffsetsApi:
    """AlterShareGroupOffsets or DeleteShareGroupOffsets (version 0): the caller may ``group_op``
    the group, an empty share group, then ``change`` is applied to each requested topic."""
    handler = functools.partial(change_each_topic, group_op=group_op, change=change)
    return ShareOffsetsApi(key, name, 0, 0, handler, change_error_response)


async def change_each_topic(
    ctx: RequestContext, request: Any, *, edge: ShareOffsetsEdge, group_op: Op, change: TopicChange
) -> dict[str, Any]:
    """The group checked (``group_op``, an empty share group), then ``change`` for each requested
    topic, checked for Topic READ."""
    group_id = request.group_id
    require_empty_share_group(ctx, edge.authorizer, group_op, edge.groups, group_id)
    responses = []
    for topic in request.topics:
        info, refused = checked_topic(ctx, edge.authorizer, Op.READ, edge.topics, topic.topic_name)
        responses.append(await change(edge, group_id, topic, info, refused))
    return {"throttle_time": 0, "error_code": ErrorCode.none, "responses": responses}


def share_group_error(groups: GroupService, group_id: str, *, empty: bool) -> ErrorCode:
    """NONE when ``group_id`` is a share group (with no member when ``empty``); else Kafka's code:
    GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or the coordinator's (NOT_COORDINATOR, loading)."""
    try:
        described = groups.describe_share_group(group_id)
    except KafkaError as exc:
        return exc.code
    if described.error_code != ErrorCode.none:
        return ErrorCode.group_id_not_found
    if empty and described.members:
        return ErrorCode.non_empty_group
    return ErrorCode.none


def require_empty_share_group(
    ctx: RequestContext, authorizer: Authorizer, op: Op, groups: GroupService, group_id: str
) -> None:
    """The caller may ``op`` the group and it is a share group with no member; else a top-level error."""
    require_group(ctx, authorizer, op, group_id)
    code = share_group_error(groups, group_id, empty=True)
    if code != ErrorCode.none:
        raise KafkaError(code, f"{group_id} is not an empty share group")


def topic_of(topics: TopicManager, name: str) -> TopicInfo | None:
    info = topics.get(name)
    return None if info is None or info.internal else info


def checked_topic(
    ctx: RequestContext, authorizer: Authorizer, op: Op, topics: TopicManager, name: str
) -> tuple[TopicInfo | None, ErrorCode | None]:
    """The named topic and, when none of its partitions may be answered, why: TOPIC_AUTHORIZATION_FAILED
    without ``op`` on it, UNKNOWN_TOPIC_OR_PARTITION when it is not a (non-internal) topic."""
    info = topic_of(topics, name)
    if not may_topic(ctx, authorizer, op, name):
        return info, ErrorCode.topic_authorization_failed
    if info is None:
        return info, ErrorCode.unknown_topic_or_partition
    return info, None


def partition_error(info: TopicInfo | None, refused: ErrorCode | None, index: int) -> ErrorCode | None:
    """Why partition ``index`` of a checked topic may not be answered, or None when it may."""
    if refused is not None:
        return refused
    if info is None or not 0 <= index < info.partitions:
        return ErrorCode.unknown_topic_or_partition
    return None


def topic_answer(name: str, info: TopicInfo | None, **fields: Any) -> dict[str, Any]:
    """One topic's entry of a response: its name, its id when known, and ``fields``."""
    return {"topic_name": name, "topic_id": None if info is None else info.topic_id, **fields}
