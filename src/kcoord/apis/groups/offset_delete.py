"""OffsetDelete (key 47), version 0: delete a group's committed offsets for some partitions.

GROUP_ID_NOT_FOUND for a missing group, NON_EMPTY_GROUP for an active group whose protocol type
is not ``consumer``, GROUP_SUBSCRIBED_TO_TOPIC for a partition of a topic the group consumes.

Authorization: Group DELETE, then Topic READ per topic.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, may_topic, require_named_group
from kcoord.apis.error_answers import code_and_empty
from kcoord.apis.groups.common import GroupApi
from kcoord.coordinator.offsets import (
    OffsetDeletePartitionResult,
    OffsetDeleteResponse,
    OffsetDeleteTopic,
    OffsetDeleteTopicResult,
)
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


async def handle_offset_delete(
    ctx: RequestContext, request: Any, *, groups: GroupService, authorizer: Authorizer
) -> Any:
    """Group DELETE (else GROUP_AUTHORIZATION_FAILED), then Topic READ per topic, as Kafka checks."""
    require_named_group(ctx, authorizer, Op.DELETE, request.group_id)
    topics = [
        OffsetDeleteTopic(t.name, [int(p.partition_index) for p in t.partitions]) for t in request.topics
    ]
    allowed = [t for t in topics if may_topic(ctx, authorizer, Op.READ, t.name)]
    if len(allowed) == len(topics):
        return await groups.delete_offsets(request.group_id, topics)
    response = await groups.delete_offsets(request.group_id, allowed)
    if response.error_code != ErrorCode.none:
        return response
    code = ErrorCode.topic_authorization_failed
    denied = [
        OffsetDeleteTopicResult(t.name, [OffsetDeletePartitionResult(i, code) for i in t.partition_indexes])
        for t in topics
        if t not in allowed
    ]
    return OffsetDeleteResponse(response.error_code, [*response.topics, *denied])


api = GroupApi(ApiKey.OFFSET_DELETE, "OffsetDelete", 0, 0, handle_offset_delete, code_and_empty("topics"))
