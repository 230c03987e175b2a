"""AlterShareGroupOffsets (key 91), version 0: set where an empty share group's partitions start.

Each named partition starts afresh at its ``start_offset``: a new state epoch with nothing in flight,
durable before the answer (InitializeShareGroupState inside kcoord), so everything from there is
delivered again (reset to earliest: the whole log). A group id that is not a share group is
GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP (top-level); an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION, a negative offset INVALID_REQUEST, per partition.

Authorization, as Kafka 4.2: Group READ (else GROUP_AUTHORIZATION_FAILED), Topic READ per topic
(else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op
from kcoord.apis.groups.share_group_offsets import (
    ShareOffsetsEdge,
    change_api,
    partition_error,
    topic_answer,
)
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.api import TopicInfo


async def alter_topic(
    edge: ShareOffsetsEdge, group_id: str, topic: Any, info: TopicInfo | None, refused: ErrorCode | None
) -> dict[str, Any]:
    """Each named partition starts afresh at its ``start_offset``, durable before the answer."""
    answers = []
    for p in topic.partitions:
        index = int(p.partition_index)
        result = partition_error(info, refused, index)
        if result is None and info is not None:
            result = await edge.leader.alter_offset(group_id, (info.topic_id, index), int(p.start_offset))
        answers.append({"partition_index": index, "error_code": result, "error_message": None})
    return topic_answer(topic.topic_name, info, partitions=answers)


api = change_api(ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsets", Op.READ, alter_topic)
