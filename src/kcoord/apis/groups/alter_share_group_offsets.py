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

from typing import Any

from kcoord.apis.access import Op
from kcoord.apis.groups.share_group_offsets import (
    change_each_topic,
    change_error_response,
    partition_error,
    share_offsets_api,
    topic_answer,
)
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.registry import ApiSpec
from kcoord.runtime.group_service import GroupService
from kcoord.runtime.share_partition_leader import SharePartitionLeader
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext
from kcoord.storage.api import TopicInfo


def api(
    groups: GroupService, leader: SharePartitionLeader, topics: TopicManager, *, authorizer: Authorizer
) -> ApiSpec:
    return share_offsets_api(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        "AlterShareGroupOffsets",
        0,
        handle_alter_share_group_offsets,
        change_error_response,
        (groups, leader, topics, authorizer),
    )


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

    async def alter(topic: Any, info: TopicInfo | None, refused: ErrorCode | None) -> dict[str, Any]:
        answers = []
        for p in topic.partitions:
            index = int(p.partition_index)
            result = partition_error(info, refused, index)
            if result is None and info is not None:
                result = await leader.alter_offset(group_id, (info.topic_id, index), int(p.start_offset))
            answers.append({"partition_index": index, "error_code": result, "error_message": None})
        return topic_answer(topic.topic_name, info, partitions=answers)

    return await change_each_topic(ctx, request, Op.READ, (groups, topics, authorizer), alter)
