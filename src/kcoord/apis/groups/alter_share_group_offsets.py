"""AlterShareGroupOffsets (key 91), version 0: set where an empty share group's partitions start.

Each named partition starts afresh at its ``start_offset``: a new state epoch with nothing in flight,
durable before the answer (InitializeShareGroupState inside kcoord), so everything from there is
delivered again (reset to earliest: the whole log). A group id that is not a share group is
GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP (top-level); an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION, a negative offset INVALID_REQUEST, per partition.

Authorization, as Kafka 4.2: Group READ (else GROUP_AUTHORIZATION_FAILED), Topic READ per topic
(else TOPIC_AUTHORIZATION_FAILED for its partitions).
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
        handle_alter_share_group_offsets, groups=groups, leader=leader, topics=topics, authorizer=authorizer
    )
    return ApiSpec(ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsets", 0, 0, handler, _error_response)


async def handle_alter_share_group_offsets(
    ctx: RequestContext,
    request: Any,
    *,
    groups: GroupService,
    leader: SharePartitionLeader,
    topics: TopicManager,
    authorizer: Authorizer,
) -> dict[str, Any]:
    group_id = request.group_id
    require_group(ctx, authorizer, Op.READ, group_id)
    code = share_group_error(groups, group_id, empty=True)
    if code != ErrorCode.none:
        raise KafkaError(code, f"{group_id} is not an empty share group")
    responses = []
    for topic in request.topics:
        info = topic_of(topics, topic.topic_name)
        refused = None
        if not may_topic(ctx, authorizer, Op.READ, topic.topic_name):
            refused = ErrorCode.topic_authorization_failed
        elif info is None:
            refused = ErrorCode.unknown_topic_or_partition
        answers = []
        for p in topic.partitions:
            index = int(p.partition_index)
            if refused is not None or info is None or not 0 <= index < info.partitions:
                result = refused or ErrorCode.unknown_topic_or_partition
            else:
                result = await leader.alter_offset(group_id, (info.topic_id, index), int(p.start_offset))
            answers.append({"partition_index": index, "error_code": result, "error_message": None})
        responses.append(
            {
                "topic_name": topic.topic_name,
                "topic_id": None if info is None else info.topic_id,
                "partitions": answers,
            }
        )
    return {"throttle_time": 0, "error_code": ErrorCode.none, "responses": responses}
