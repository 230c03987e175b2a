"""DescribeShareGroupOffsets (key 90), versions 0-1: where each share partition of a share group starts.

- v0: per group, per topic partition: the start offset (the first offset whose delivery is not
  complete; -1 when the partition has no state) and the leader epoch of the last state write.
- v1: ``lag``: records from the start offset to the log end whose delivery is not complete.

Without topics, every partition the group has state for is described. A group id that is not a
share group is GROUP_ID_NOT_FOUND; an unknown topic UNKNOWN_TOPIC_OR_PARTITION per partition.

Authorization, as Kafka 4.2: Group DESCRIBE (else GROUP_AUTHORIZATION_FAILED for the group), Topic
DESCRIBE per topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op, may_group
from kcoord.apis.groups.share_group_offsets import (
    ShareOffsetsApi,
    ShareOffsetsEdge,
    checked_topic,
    partition_error,
    share_group_error,
    topic_answer,
)
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"groups": [_failed(g.group_id, code) for g in request.groups]}


async def handle_describe_share_group_offsets(
    ctx: RequestContext, request: Any, *, edge: ShareOffsetsEdge
) -> dict[str, Any]:
    answers = []
    for group in request.groups:
        group_id = group.group_id
        if not may_group(ctx, edge.authorizer, Op.DESCRIBE, group_id):
            answers.append(_failed(group_id, ErrorCode.group_authorization_failed))
            continue
        code = share_group_error(edge.groups, group_id, empty=False)
        if code != ErrorCode.none:
            answers.append(_failed(group_id, code))
            continue
        asked = _asked(group, edge)
        described = [
            await _topic(ctx, edge, group_id, name, partitions) for name, partitions in sorted(asked.items())
        ]
        answers.append({"group_id": group_id, "topics": described, "error_code": ErrorCode.none})
    return {"throttle_time": 0, "groups": answers}


def _asked(group: Any, edge: ShareOffsetsEdge) -> dict[str, list[int]]:
    """Topic name -> partitions: the request's, or every partition the group has state for."""
    if group.topics is not None:
        return {t.topic_name: [int(p) for p in t.partitions] for t in group.topics}
    found: dict[str, set[int]] = {}
    known = dict(edge.groups.share_group_partitions(group.group_id))
    for topic_id, partition in edge.leader.led_partitions(group.group_id):
        known[topic_id] = (*known.get(topic_id, ()), partition)
    for topic_id, partitions in known.items():
        info = edge.topics.get_by_id(topic_id)
        if info is not None:
            found.setdefault(info.name, set()).update(partitions)
    return {name: sorted(partitions) for name, partitions in found.items()}


async def _topic(
    ctx: RequestContext, edge: ShareOffsetsEdge, group_id: str, name: str, partitions: list[int]
) -> dict[str, Any]:
    info, refused = checked_topic(ctx, edge.authorizer, Op.DESCRIBE, edge.topics, name)
    answers = []
    for partition in partitions:
        error = partition_error(info, refused, partition)
        if error is not None or info is None:
            answers.append(_partition(partition, -1, -1, -1, error or ErrorCode.unknown_topic_or_partition))
            continue
        start, epoch, lag = await edge.leader.describe_offset(group_id, (info.topic_id, partition))
        answers.append(_partition(partition, start, epoch, lag, ErrorCode.none))
    return topic_answer(name, info, partitions=answers)


def _partition(index: int, start: int, epoch: int, lag: int, code: ErrorCode) -> dict[str, Any]:
    return {
        "partition_index": index,
        "start_offset": start,
        "leader_epoch": epoch,
        "lag": lag,
        "error_code": code,
        "error_message": None,
    }


def _failed(group_id: str, code: ErrorCode) -> dict[str, Any]:
    return {"group_id": group_id, "topics": [], "error_code": code, "error_message": None}


api = ShareOffsetsApi(
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    "DescribeShareGroupOffsets",
    0,
    1,
    handle_describe_share_group_offsets,
    _error_response,
)
