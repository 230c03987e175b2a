"""LeaveGroup (key 13), versions 0-5.

- v0-2: one ``member_id``; the error is top level.
- v1: throttle time.
- v3: ``members[]`` (batch leave, KIP-345) with a result per member.
- v4: flexible.
- v5: a ``reason`` per member (KIP-800), kept in the rebalance history.

Authorization: Group READ, else GROUP_AUTHORIZATION_FAILED (a stranger cannot evict).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, require_group
from kcoord.apis.error_answers import code_and_empty
from kcoord.apis.groups.common import GroupApi
from kcoord.coordinator.classic.messages import LeaveGroupRequest, LeaveGroupResponse, LeavingMember
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


async def handle_leave_group(
    ctx: RequestContext, request: Any, *, groups: GroupService, authorizer: Authorizer
) -> dict[str, Any]:
    require_group(ctx, authorizer, Op.READ, request.group_id)
    if ctx.api_version < 3:
        members: tuple[LeavingMember, ...] = (LeavingMember(member_id=request.member_id),)
    else:
        members = tuple(
            LeavingMember(m.member_id, getattr(m, "group_instance_id", None), getattr(m, "reason", None))
            for m in request.members
        )
    leave = LeaveGroupRequest(group_id=request.group_id, members=members)
    response: LeaveGroupResponse = await groups.leave_group(leave)
    if ctx.api_version < 3:
        error = response.error_code
        if error == ErrorCode.none and response.members:
            error = response.members[0].error_code
        return {"error_code": error}
    return {"error_code": response.error_code, "members": response.members}


api = GroupApi(ApiKey.LEAVE_GROUP, "LeaveGroup", 0, 5, handle_leave_group, code_and_empty("members"))
