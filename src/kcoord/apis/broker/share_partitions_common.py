"""What ShareFetch and ShareAcknowledge share: topic ids to names under Topic READ, acknowledgement
batches, and the per-partition answer shape."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kcoord.apis.access import Op, may_topic
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.share_partition_leader import AcknowledgementBatch, TopicIdPartition
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

TopicNameOf = Callable[[uuid.UUID], "str | None"]


def readable(
    ctx: RequestContext, authorizer: Authorizer, name_of: TopicNameOf, topic_id: uuid.UUID | None
) -> ErrorCode:
    """NONE when the topic exists and the principal may READ it; else the partition's error."""
    name = None if topic_id is None else name_of(topic_id)
    if name is None:
        return ErrorCode.unknown_topic_id
    if not may_topic(ctx, authorizer, Op.READ, name):
        return ErrorCode.topic_authorization_failed
    return ErrorCode.none


def acknowledgements(partition: Any) -> list[AcknowledgementBatch]:
    return [
        (int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types))
        for b in partition.acknowledgement_batches
    ]


def by_topic(answers: dict[TopicIdPartition, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-partition answers grouped by topic id, in a stable order."""
    topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, _), answer in sorted(answers.items(), key=lambda item: (str(item[0][0]), item[0][1])):
        topics.setdefault(topic_id, []).append(answer)
    return [{"topic_id": topic_id, "partitions": partitions} for topic_id, partitions in topics.items()]


def current_leader(node_id: int) -> dict[str, int]:
    return {"leader_id": node_id, "leader_epoch": 0}
