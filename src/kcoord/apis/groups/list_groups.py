"""ListGroups (key 16), versions 0-5.

- v1: throttle time.
- v3: flexible.
- v4: ``states_filter`` (case-insensitive) and ``group_state`` per group.
- v5: ``types_filter`` ("classic", "consumer", "share") and ``group_type`` per group.

Groups on a partition that is still loading are left out and the answer carries
COORDINATOR_LOAD_IN_PROGRESS, as Kafka's does.

Authorization: Cluster DESCRIBE lists every group; otherwise the groups the principal
may DESCRIBE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, may_cluster, may_group
from kcoord.apis.error_answers import code_and_empty
from kcoord.apis.groups.common import GroupApi
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


async def handle_list_groups(
    ctx: RequestContext, request: Any, *, groups: GroupService, authorizer: Authorizer
) -> dict[str, Any]:
    """Cluster DESCRIBE lists every group; otherwise only the groups the principal may DESCRIBE."""
    everything = may_cluster(ctx, authorizer, Op.DESCRIBE)
    states = list(getattr(request, "states_filter", ()) or ()) or None
    types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
    listing = groups.list_groups(states)
    error = ErrorCode.none if listing.complete else ErrorCode.coordinator_load_in_progress
    listed_groups = [
        {
            "group_id": listed.group_id,
            "protocol_type": listed.protocol_type,
            "group_state": listed.state,
            "group_type": listed.group_type,
        }
        for listed in listing.groups
        if (not types or listed.group_type in types)
        and (everything or may_group(ctx, authorizer, Op.DESCRIBE, listed.group_id))
    ]
    return {"error_code": error, "groups": listed_groups}


api = GroupApi(ApiKey.LIST_GROUPS, "ListGroups", 0, 5, handle_list_groups, code_and_empty("groups"))
