"""OffsetDelete (key 47), version 0: delete a group's committed offsets for some partitions.

GROUP_ID_NOT_FOUND for a missing group, NON_EMPTY_GROUP for an active group whose protocol type
is not ``consumer``, GROUP_SUBSCRIBED_TO_TOPIC for a partition of a topic the group consumes.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.groups.common import coordinator
from kcoord.coordinator.offsets import OffsetDeleteTopic
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.registry import REGISTRY
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "topics": []}


@REGISTRY.api(ApiKey.OFFSET_DELETE, "OffsetDelete", 0, 0, error_response=_error_response)
async def handle_offset_delete(ctx: RequestContext, request: Any) -> Any:
    if not request.group_id:
        raise KafkaError(ErrorCode.invalid_group_id)
    topics = [
        OffsetDeleteTopic(t.name, [int(p.partition_index) for p in t.partitions]) for t in request.topics
    ]
    group_id = request.group_id
    return await coordinator(ctx).write(
        group_id, lambda shard, sink, now: shard.delete_offsets(group_id, topics, sink, now)
    )
