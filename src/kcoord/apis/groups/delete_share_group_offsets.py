"""DeleteShareGroupOffsets (key 92), version 0: forget an empty share group's state of some topics.

Every partition of each named topic loses its share state (DeleteShareGroupState inside kcoord,
durable before the answer); the group's next fetch starts it again by ``share.auto.offset.reset``.
A group id that is not a share group is GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP
(top-level); an unknown topic UNKNOWN_TOPIC_OR_PARTITION per topic.

Authorization, as Kafka 4.2: Group DELETE (else GROUP_AUTHORIZATION_FAILED), Topic READ per topic
(else TOPIC_AUTHORIZATION_FAILED for it).
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op
from kcoord.apis.groups.share_group_offsets import (
    change_each_topic,
    change_error_response,
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
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        "DeleteShareGroupOffsets",
        0,
        handle_delete_share_group_offsets,
        change_error_response,
        (groups, leader, topics, authorizer),
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

    async def delete(topic: Any, info: TopicInfo | None, refused: ErrorCode | None) -> dict[str, Any]:
        if refused is None and info is not None:
            await leader.delete_offsets(group_id, [(info.topic_id, p) for p in range(info.partitions)])
        return topic_answer(topic.topic_name, info, error_code=refused or ErrorCode.none, error_message=None)

    return await change_each_topic(ctx, request, Op.DELETE, (groups, topics, authorizer), delete)
