"""ConsumerGroupDescribe (key 69), versions 0-1: the members and assignments of consumer groups.

- v0: group state, group and assignment epochs, assignor; per member its epoch, subscription,
  current and target assignment.
- v1: ``member_type`` (-1 unknown, 0 classic, 1 consumer): 0 for a member of a migrating group
  that still speaks the classic protocol.

Asked for (``include_authorized_operations``), a described group carries the describer's bit set
of group operations.

A group id that is not a consumer group (missing, or a classic group) gets GROUP_ID_NOT_FOUND, as
Kafka answers.

Authorization, as Kafka 4: Group DESCRIBE per group (else GROUP_AUTHORIZATION_FAILED), and a group
whose members' assignments or target assignments name a topic the describer may not DESCRIBE is
answered TOPIC_AUTHORIZATION_FAILED with no members, so no name, id or owner of such a topic shows.
kcoord also counts the subscribed topic names, which Kafka's check leaves out: a name there is as
telling as one in an assignment.
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
from kcoord.coordinator.assignors import Assignment
from kcoord.coordinator.consumer.messages import DescribedConsumerGroup
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_service import GroupService

CLASSIC_MEMBER_TYPE = 0
CONSUMER_MEMBER_TYPE = 1


def _lookup(groups: GroupService, topics: TopicManager, group_id: str) -> Found:
    described, classic = groups.describe_consumer_group(group_id)
    if described is None:
        kind = "is not a consumer group" if classic else "not found"
        raise GroupNotDescribedError(ErrorCode.group_id_not_found, f"Group {group_id} {kind}.")
    return _topic_names(described), functools.partial(_described, described, topics)


def _topic_names(group: DescribedConsumerGroup) -> set[str]:
    """Every topic the answer would name: subscriptions, assignments and target assignments."""
    names: set[str] = set()
    for member in group.members:
        names.update(member.subscribed_topics, member.assignment, member.target_assignment)
    return names


def _described(group: DescribedConsumerGroup, topics: TopicManager, operations: int) -> dict[str, Any]:
    head = described_group(
        group.group_id, group.state, group.group_epoch, group.target_epoch, group.assignor, operations
    )
    return {
        **head,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topics),
                "subscribed_topic_regex": m.subscribed_regex,
                "assignment": {"topic_partitions": _partitions(m.assignment, topics)},
                "target_assignment": {"topic_partitions": _partitions(m.target_assignment, topics)},
                "member_type": CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
            }
            for m in group.members
        ],
    }


def _partitions(assignment: Assignment, topics: TopicManager) -> list[dict[str, Any]]:
    answer: list[dict[str, Any]] = []
    for name, partitions in sorted(assignment.items()):
        info = topics.get(name)
        if info is not None and partitions:
            answer.append({"topic_id": info.topic_id, "topic_name": name, "partitions": sorted(partitions)})
    return answer


api = describe_api(ApiKey.CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", 0, 1, _lookup)
