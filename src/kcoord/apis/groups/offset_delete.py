"""OffsetDelete (key 47), version 0: delete a group's committed offsets for some partitions.

GROUP_ID_NOT_FOUND for a missing group, NON_EMPTY_GROUP for an active group whose protocol type
is not ``consumer``, GROUP_SUBSCRIBED_TO_TOPIC for a partition of a topic the group consumes.
"""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.coordinator.offsets import OffsetDeleteTopic
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.runtime.group_service import GroupService
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "topics": []}


def api(groups: GroupService) -> ApiSpec:
    handler = functools.partial(handle_offset_delete, groups=groups)
    return ApiSpec(ApiKey.OFFSET_DELETE, "OffsetDelete", 0, 0, handler, _error_response)


async def handle_offset_delete(ctx: RequestContext, request: Any, *, groups: GroupService) -> Any:
    if not request.group_id:
        raise KafkaError(ErrorCode.invalid_group_id)
    topics = [
        OffsetDeleteTopic(t.name, [int(p.partition_index) for p in t.partitions]) for t in request.topics
    ]
    return await groups.delete_offsets(request.group_id, topics)
