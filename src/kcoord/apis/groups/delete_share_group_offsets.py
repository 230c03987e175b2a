"""DeleteShareGroupOffsets (key 92), version 0: forget an empty share group's state of some topics.

Every partition of each named topic loses its share state (DeleteShareGroupState inside kcoord,
durable before the answer); the group's next fetch starts it again by ``share.auto.offset.reset``.
A group id that is not a share group is GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP
(top-level); an unknown topic UNKNOWN_TOPIC_OR_PARTITION per topic.

Authorization, as Kafka 4.2: Group DELETE (else GROUP_AUTHORIZATION_FAILED), Topic READ per topic
(else TOPIC_AUTHORIZATION_FAILED for it).
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op
from kcoord.apis.groups.share_group_offsets import ShareOffsetsEdge, change_api, topic_answer
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.api import TopicInfo


async def delete_topic(
    edge: ShareOffsetsEdge, group_id: str, topic: Any, info: TopicInfo | None, refused: ErrorCode | None
) -> dict[str, Any]:
    """Every partition of the topic loses its share state, durable before the answer."""
    if refused is None and info is not None:
        await edge.leader.delete_offsets(group_id, [(info.topic_id, p) for p in range(info.partitions)])
    return topic_answer(topic.topic_name, info, error_code=refused or ErrorCode.none, error_message=None)


api = change_api(ApiKey.DELETE_SHARE_GROUP_OFFSETS, "DeleteShareGroupOffsets", Op.DELETE, delete_topic)
