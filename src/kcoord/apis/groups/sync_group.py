"""SyncGroup (key 14), versions 0-5.

- v1: throttle time.
- v3: ``group_instance_id``.
- v4: flexible.
- v5: ``protocol_type`` and ``protocol_name`` in request and response; when given they must match
  the group's (INCONSISTENT_GROUP_PROTOCOL).

Followers wait for the leader's assignment; the leader's SyncGroup writes the group record and
every waiting member is answered once it is durable.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.groups.common import coordinator, watch_member
from kcoord.coordinator.classic.messages import SyncGroupRequest
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.registry import REGISTRY
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "assignment": b""}


@REGISTRY.api(ApiKey.SYNC_GROUP, "SyncGroup", 0, 5, error_response=_error_response)
async def handle_sync_group(ctx: RequestContext, request: Any) -> Any:
    sync = SyncGroupRequest(
        group_id=request.group_id,
        generation_id=int(request.generation_id),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
        api_version=ctx.api_version,
    )
    connection_id = ctx.connection.connection_id
    response = await coordinator(ctx).write(
        sync.group_id, lambda shard, sink, now: shard.sync_group(sync, sink, now, connection_id)
    )
    if response.error_code == ErrorCode.none:
        watch_member(ctx, sync.group_id, sync.member_id)
    return response
