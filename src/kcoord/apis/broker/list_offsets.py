"""ListOffsets (key 2), versions 1-7.

- v1: one timestamp per partition; the answer is one offset and its timestamp.
- v2: ``isolation_level`` (READ_COMMITTED reads up to the last stable offset).
- v3: no change to the body.
- v4: ``current_leader_epoch`` in the request, ``leader_epoch`` in the response.
- v5: no change to the body.
- v6: flexible.
- v7: timestamp -3 (MAX_TIMESTAMP, KIP-734).
- v8+ (-4 earliest local, tiered storage) are not served. v0 (old-style offset lists) neither:
  every client in use sends v1 or later.

Special timestamps: -2 => the log start offset, -1 => the log end offset (the last stable offset
too: kcoord has no transactions), -3 => the batch holding the largest timestamp; all with
timestamp -1 except -3. Any other value finds the first batch whose max timestamp is >= it, from
the log's time index, and answers that batch's base offset and max timestamp; Kafka decodes
records to answer the exact record, which kcoord never does, so a consumer that seeks by time may
also get the records of that batch older than the timestamp (the same holds for -3, answered
with the base offset of the batch). Not found => offset -1, timestamp -1.

Leader epochs are -1 everywhere (kcoord reports -1 in Metadata), so ``current_leader_epoch``
is ignored and ``leader_epoch`` is -1. UNKNOWN_TOPIC_OR_PARTITION per partition.

Authorization: Topic DESCRIBE per topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import functools
from typing import Any

from kcoord.apis.access import Op, may_topic
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.registry import ApiSpec
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext
from kcoord.storage.api import PartitionLog

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


def list_offsets_error(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {
        "topics": [
            {"name": t.name, "partitions": [_answer(int(p.partition_index), code) for p in t.partitions]}
            for t in request.topics
        ]
    }


def api(topics: TopicManager, *, authorizer: Authorizer) -> ApiSpec:
    handler = functools.partial(handle_list_offsets, topics=topics, authorizer=authorizer)
    return ApiSpec(ApiKey.LIST_OFFSETS, "ListOffsets", 1, 7, handler, list_offsets_error)


async def handle_list_offsets(
    ctx: RequestContext, request: Any, *, topics: TopicManager, authorizer: Authorizer
) -> dict[str, Any]:
    """Topic DESCRIBE per topic, else TOPIC_AUTHORIZATION_FAILED for its partitions."""
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    _answer(int(p.partition_index), ErrorCode.topic_authorization_failed)
                    if not may_topic(ctx, authorizer, Op.DESCRIBE, t.name)
                    else _lookup(
                        int(p.partition_index),
                        int(p.timestamp),
                        topics.partition_log(t.name, int(p.partition_index)),
                    )
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
    }


def _lookup(index: int, timestamp: int, partition_log: PartitionLog | None) -> dict[str, Any]:
    if partition_log is None:
        return _answer(index, ErrorCode.unknown_topic_or_partition)
    if timestamp == LATEST_TIMESTAMP:
        return _answer(index, ErrorCode.none, partition_log.log_end_offset)
    if timestamp == EARLIEST_TIMESTAMP:
        return _answer(index, ErrorCode.none, partition_log.log_start_offset)
    found = (
        partition_log.max_timestamp()
        if timestamp == MAX_TIMESTAMP
        else partition_log.offset_for_timestamp(timestamp)
    )
    if found is None or found[0] < 0:
        return _answer(index, ErrorCode.none)
    offset, found_timestamp = found
    return _answer(index, ErrorCode.none, offset, found_timestamp)


def _answer(index: int, code: ErrorCode, offset: int = -1, timestamp: int = -1) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": code,
        "timestamp": timestamp,
        "offset": offset,
        "leader_epoch": -1,
    }
