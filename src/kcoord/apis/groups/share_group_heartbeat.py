"""ShareGroupHeartbeat (key 76), version 1: the one membership request of share groups (KIP-932).

- v0 was Kafka 4.0's early-access version and is not served (Kafka 4.1 removed it too).
- v1: the client makes up its member id; epoch 0 joins, -1 leaves, any other epoch must be the
  member's current one. The answer carries the member's epoch and, when it changed, its
  assignment; a share group may give one partition to several members.

Topics travel as topic ids in the assignment and as names in the subscription. A group id that
belongs to a classic or consumer group is GROUP_ID_NOT_FOUND, as Kafka answers.

Authorization, as Kafka 4.2: Group READ (else GROUP_AUTHORIZATION_FAILED), then Topic DESCRIBE on
every subscribed topic name (else TOPIC_AUTHORIZATION_FAILED, and nothing changes).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, require_group
from kcoord.apis.groups.common import GroupApi, heartbeat_response, require_subscribed_topics
from kcoord.coordinator.share.messages import ShareHeartbeatRequest
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "member_epoch": -1, "heartbeat_interval": 0}


async def handle_share_group_heartbeat(
    ctx: RequestContext, request: Any, *, groups: GroupService, authorizer: Authorizer
) -> dict[str, Any]:
    """Group READ, then Topic DESCRIBE on the subscribed names, as Kafka 4.2 asks."""
    require_group(ctx, authorizer, Op.READ, request.group_id)
    names = request.subscribed_topic_names
    require_subscribed_topics(ctx, authorizer, names)
    beat = ShareHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
    )
    response = await groups.share_heartbeat(beat)
    assignment = None
    if response.assignment is not None:
        assignment = [
            {"topic_id": topic_id, "partitions": list(partitions)}
            for topic_id, partitions in response.assignment
        ]
    return heartbeat_response(response, assignment)


api = GroupApi(
    ApiKey.SHARE_GROUP_HEARTBEAT, "ShareGroupHeartbeat", 1, 1, handle_share_group_heartbeat, _error_response
)
