"""DeleteShareGroupOffsets (key 92), version 0: forget an empty share group's state of some topics.

Every partition of each named topic loses its share state (DeleteShareGroupState inside kcoord,
durable before the answer); the group's next fetch starts it again by ``share.auto.offset.reset``.
A group id that is not a share group is GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP
(top-level); an unknown topic UNKNOWN_TOPIC_OR_PARTITION per topic.

Authorization, as Kafka 4.2: Group DELETE (else GROUP_AUTHORIZATION_FAILED), Topic READ per topic
(else TOPIC_AUTHORIZATION_FAILED for it).
"""

from __future__ import annotations

import functools
from typing import Any

from kcoord.apis.access import Op, may_topic, require_group
from kcoord.apis.groups.share_group_offsets import share_group_error, topic_of
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.runtime.group_service import GroupService
from kcoord.runtime.share_partition_leader import SharePartitionLeader
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "responses": []}


def api(
    groups: GroupService, leader: SharePartitionLeader, topics: TopicManager, *, authorizer: Authorizer
) -> ApiSpec:
    handler = functools.partial(
        handle_delete_share_group_offsets, groups=groups, leader=leader, topics=topics, authorizer=authorizer
    )
    return ApiSpec(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS, "DeleteShareGroupOffsets", 0, 0, handler, _error_response
    )


async def handle_delete_share_group_offsets(
    ctx: RequestContext,
    request: Any,
    *,
    groups: GroupService,
    leader: SharePartitionLeader,
    topics: TopicManager,
    authorizer: Authorizer,
) -> dict[str, Any]:
    group_id = request.group_id
    require_group(ctx, authorizer, Op.DELETE, group_id)
    code = share_group_error(groups, group_id, empty=True)
    if code != ErrorCode.none:
        raise KafkaError(code, f"{group_id} is not an empty share group")
    responses = []
    for topic in request.topics:
        info = topic_of(topics, topic.topic_name)
        result = ErrorCode.none
        if not may_topic(ctx, authorizer, Op.READ, topic.topic_name):
            result = ErrorCode.topic_authorization_failed
        elif info is None:
            result = ErrorCode.unknown_topic_or_partition
        else:
            await leader.delete_offsets(group_id, [(info.topic_id, p) for p in range(info.partitions)])
        responses.append(
            {
                "topic_name": topic.topic_name,
                "topic_id": None if info is None else info.topic_id,
                "error_code": result,
                "error_message": None,
            }
        )
    return {"throttle_time": 0, "error_code": ErrorCode.none, "responses": responses}
