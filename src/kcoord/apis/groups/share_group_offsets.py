"""What the three share group offset APIs share: the group must be a share group (and, to change
its offsets, have no member), and topics are named, each checked against the topic catalogue."""

from __future__ import annotations

from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.group_service import GroupService
from kcoord.storage.api import TopicInfo


def share_group_error(groups: GroupService, group_id: str, *, empty: bool) -> ErrorCode:
    """NONE when ``group_id`` is a share group (with no member when ``empty``); else Kafka's code:
    GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or the coordinator's (NOT_COORDINATOR, loading)."""
    try:
        described = groups.describe_share_group(group_id)
    except KafkaError as exc:
        return exc.code
    if described.error_code != ErrorCode.none:
        return ErrorCode.group_id_not_found
    if empty and described.members:
        return ErrorCode.non_empty_group
    return ErrorCode.none


def topic_of(topics: TopicManager, name: str) -> TopicInfo | None:
    info = topics.get(name)
    return None if info is None or info.internal else info
