"""DeleteGroups (key 42), versions 0-2.

- v1: no change to the layout.
- v2: flexible.

Per group: GROUP_ID_NOT_FOUND when it does not exist, NON_EMPTY_GROUP while it has members;
otherwise its offsets and then the group itself are tombstoned in the offsets log.

Authorization: Group DELETE per group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, may_group
from kcoord.apis.groups.common import GroupApi
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"results": [{"group_id": g, "error_code": code} for g in request.groups_names]}


async def handle_delete_groups(
    ctx: RequestContext, request: Any, *, groups: GroupService, authorizer: Authorizer
) -> dict[str, Any]:
    results: dict[str, ErrorCode] = {}
    valid: list[str] = []
    for group_id in request.groups_names:
        if not group_id:
            results[group_id] = ErrorCode.invalid_group_id
        elif not may_group(ctx, authorizer, Op.DELETE, group_id):
            results[group_id] = ErrorCode.group_authorization_failed
        else:
            valid.append(group_id)
    results.update({a.group_id: a.error_code for a in await groups.delete_groups(valid)})
    return {"results": [{"group_id": g, "error_code": results[g]} for g in request.groups_names]}


api = GroupApi(ApiKey.DELETE_GROUPS, "DeleteGroups", 0, 2, handle_delete_groups, _error_response)
