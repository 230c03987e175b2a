"""ConsumerGroupHeartbeat (key 68), versions 0-1: the one request of KIP-848 consumer groups.

- v0: member epoch 0 joins (the coordinator generates the member id when none is sent), -1 leaves,
  -2 is a static member's temporary leave; the answer carries the member's epoch and, when it
  changed, its assignment.
- v1: the client always generates its member id; ``subscribed_topic_regex``: a regular expression
  over topic names (whole-name match), resolved again whenever topics are created or deleted; an
  invalid one gets INVALID_REGULAR_EXPRESSION.

kcoord's fast failover holds here too: when the connection that carried a dynamic member's last
heartbeat closes, its session is cut to about two heartbeat intervals.

Topics travel as topic ids on the wire and as names in the core; an owned partition of a topic id
this broker does not know is dropped (the topic was deleted).

Authorization, as Kafka 4: Group READ (else GROUP_AUTHORIZATION_FAILED), then Topic DESCRIBE on
every subscribed topic name (else TOPIC_AUTHORIZATION_FAILED, and nothing changes); a regex
resolves only to the topics the member's principal may DESCRIBE, checked again at every heartbeat.
"""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, require_group
from kcoord.apis.groups.common import MemberWatch, heartbeat_response, require_subscribed_topics
from kcoord.apis.wiring import own_api
from kcoord.cluster.topic_manager import TopicManager
from kcoord.coordinator.assignors import Assignment
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest, TopicFilter
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_service import GroupService
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "member_epoch": -1}


async def handle_consumer_group_heartbeat(
    ctx: RequestContext,
    request: Any,
    *,
    groups: GroupService,
    topics: TopicManager,
    members: MemberWatch,
    authorizer: Authorizer,
) -> dict[str, Any]:
    """Group READ, then Topic DESCRIBE on the subscribed names, as Kafka 4 asks."""
    require_group(ctx, authorizer, Op.READ, request.group_id)
    require_subscribed_topics(ctx, authorizer, request.subscribed_topic_names)
    rebalance_timeout = request.rebalance_timeout
    beat = ConsumerHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=int(rebalance_timeout.total_seconds() * 1000),
        subscribed_topics=(
            None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names)
        ),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=_owned(request.topic_partitions, topics),
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
        topic_filter=_describable(ctx, authorizer),
    )
    response = await groups.consumer_heartbeat(beat, ctx.connection.connection_id)
    if response.member_epoch >= 0:
        members.watch(ctx.connection, beat.group_id, response.member_id)
    assignment = None if response.assignment is None else _by_topic_id(response.assignment, topics)
    return heartbeat_response(response, assignment)


def _describable(ctx: RequestContext, authorizer: Authorizer) -> TopicFilter | None:
    """What the member's regex may resolve to: the topics its principal may DESCRIBE (all without
    an authorizer). Bound to the principal and host, not the request, as the core keeps it."""
    if not authorizer.enabled:
        return None
    return functools.partial(
        authorizer.authorize, ctx.principal, ctx.client_host, Op.DESCRIBE, ResourceType.TOPIC
    )


def _owned(topic_partitions: Any, topics: TopicManager) -> Assignment | None:
    if topic_partitions is None:
        return None
    owned: dict[str, frozenset[int]] = {}
    for entry in topic_partitions:
        info = topics.get_by_id(entry.topic_id) if entry.topic_id is not None else None
        if info is not None:
            owned[info.name] = owned.get(info.name, frozenset()) | frozenset(entry.partitions)
    return owned


def _by_topic_id(assignment: Assignment, topics: TopicManager) -> list[dict[str, Any]]:
    answer: list[dict[str, Any]] = []
    for name, partitions in sorted(assignment.items()):
        info = topics.get(name)
        if info is not None and partitions:
            answer.append({"topic_id": info.topic_id, "partitions": sorted(partitions)})
    return answer


api = own_api(
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    "ConsumerGroupHeartbeat",
    0,
    1,
    handle_consumer_group_heartbeat,
    _error_response,
)
