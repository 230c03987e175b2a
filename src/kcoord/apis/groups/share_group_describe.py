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
    describe_api,
    described_group,
)
from kcoord.cluster.topic_manager import TopicManager
from kcoord.coordinator.share.messages import DescribedShareGroup
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_service import GroupService


def _lookup(groups: GroupService, topics: TopicManager, group_id: str) -> Found:
    described = groups.describe_share_group(group_id)
    if described.error_code != ErrorCode.none:
        message = f"Group {group_id} not found or not a share group."
        raise GroupNotDescribedError(described.error_code, message)
    return _topic_names(described, topics), functools.partial(_described, described, topics)


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
    head = described_group(
        group.group_id, group.state, group.epoch, group.assignment_epoch, group.assignor, operations
    )
    return {
        **head,
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


api = describe_api(ApiKey.SHARE_GROUP_DESCRIBE, "ShareGroupDescribe", 1, 1, _lookup)
