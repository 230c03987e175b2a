"""ShareGroupDescribe (key 77), version 1: the members and assignments of share groups (KIP-932).

- v0 was Kafka 4.0's early-access version and is not served.
- v1: group state, group and assignment epochs, assignor ("simple"); per member its epoch,
  client, subscription and assignment (topic id, name, partitions).

Asked for (``include_authorized_operations``), a described group carries the describer's bit set
of group operations. A group id that is not a share group (missing, or of another kind) gets
GROUP_ID_NOT_FOUND, as Kafka answers.

Authorization, as Kafka 4.2: Group DESCRIBE per group (else GROUP_AUTHORIZATION_FAILED), and a
group whose assignments or subscriptions name a topic the describer may not DESCRIBE is answered
TOPIC_AUTHORIZATION_FAILED with no members.
"""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.groups.group_describe import (
    Found,
    GroupNotDescribedError,
    describe_each,
    describe_error_response,
)
from kcoord.cluster.topic_manager import TopicManager
from kcoord.coordinator.share.messages import DescribedShareGroup
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.registry import ApiSpec
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def api(groups: GroupService, topics: TopicManager, *, authorizer: Authorizer) -> ApiSpec:
    handler = functools.partial(
        handle_share_group_describe, groups=groups, topics=topics, authorizer=authorizer
    )
    return ApiSpec(ApiKey.SHARE_GROUP_DESCRIBE, "ShareGroupDescribe", 1, 1, handler, describe_error_response)


async def handle_share_group_describe(
    ctx: RequestContext, request: Any, *, groups: GroupService, topics: TopicManager, authorizer: Authorizer
) -> dict[str, Any]:
    """Group DESCRIBE per group, as Kafka asks (else GROUP_AUTHORIZATION_FAILED for that group)."""

    def lookup(group_id: str) -> Found:
        described = groups.describe_share_group(group_id)
        if described.error_code != ErrorCode.none:
            message = f"Group {group_id} not found or not a share group."
            raise GroupNotDescribedError(described.error_code, message)
        return _topic_names(described, topics), functools.partial(_described, described, topics)

    return describe_each(ctx, request, authorizer, lookup)


def _topic_names(group: DescribedShareGroup, topics: TopicManager) -> set[str]:
    names: set[str] = set()
    for member in group.members:
        names.update(member.subscribed_topic_names)
        for topic_id, _ in member.assignment:
            info = topics.get_by_id(topic_id)
            if info is not None:
                names.add(info.name)
    return names


def _described(group: DescribedShareGroup, topics: TopicManager, operations: int) -> dict[str, Any]:
    return {
        "authorized_operations": operations,
        "error_code": ErrorCode.none,
        "group_id": group.group_id,
        "group_state": group.state,
        "group_epoch": group.epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.assignor,
        "members": [
            {
                "member_id": m.member_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "assignment": {"topic_partitions": _partitions(m.assignment, topics)},
            }
            for m in group.members
        ],
    }


def _partitions(assignment: Any, topics: TopicManager) -> list[dict[str, Any]]:
    answer: list[dict[str, Any]] = []
    for topic_id, partitions in assignment:
        info = topics.get_by_id(topic_id)
        if info is not None and partitions:
            answer.append({"topic_id": topic_id, "topic_name": info.name, "partitions": sorted(partitions)})
    return answer
