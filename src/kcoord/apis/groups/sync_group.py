"""SyncGroup (key 14), versions 0-5.

- v1: throttle time.
- v3: ``group_instance_id``.
- v4: flexible.
- v5: ``protocol_type`` and ``protocol_name`` in request and response; when given they must match
  the group's (INCONSISTENT_GROUP_PROTOCOL).

Followers wait for the leader's assignment; the leader's SyncGroup writes the group record and
every waiting member is answered once it is durable.

Authorization: Group READ, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, require_group
from kcoord.apis.groups.common import MemberWatch
from kcoord.apis.wiring import own_api
from kcoord.coordinator.classic.messages import SyncGroupRequest
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

log = structlog.get_logger(__name__)


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "assignment": b""}


async def handle_sync_group(
    ctx: RequestContext, request: Any, *, groups: GroupService, members: MemberWatch, authorizer: Authorizer
) -> Any:
    require_group(ctx, authorizer, Op.READ, request.group_id)
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
    response = await groups.sync_group(sync, ctx.connection.connection_id)
    if response.error_code == ErrorCode.none:
        members.watch(ctx.connection, sync.group_id, sync.member_id)
    log.debug(
        "group.sync_answered",
        group=sync.group_id,
        member=sync.member_id,
        generation=sync.generation_id,
        client_id=ctx.client_id,
        error=int(response.error_code),
        assignment=response.assignment.hex(),
    )
    return response


api = own_api(ApiKey.SYNC_GROUP, "SyncGroup", 0, 5, handle_sync_group, _error_response)
