"""DeleteRecords (key 21), versions 0-2: move partitions' log start offsets (KIP-107).

- v0: per partition an offset before which records go (-1: the high watermark); the answer is
  the partition's new low watermark.
- v1: no change to the body (throttling after the response).
- v2: flexible.

librdkafka's ``DeleteRecords`` (confluent-kafka's ``AdminClient.delete_records``) sends v0-v1,
kafka-python's ``delete_records`` v0-v2, Kafka's ``kafka-delete-records`` v2.

Per partition, checks as Kafka's ``ReplicaManager.deleteRecordsOnLocalLog`` and
``Partition.deleteRecordsOnLeader``: unknown topic or partition => UNKNOWN_TOPIC_OR_PARTITION;
an internal topic => INVALID_TOPIC_EXCEPTION; a topic whose ``cleanup.policy`` has no
``delete`` => POLICY_VIOLATION; an offset below 0 (other than -1) or past the high watermark =>
OFFSET_OUT_OF_RANGE. The log start only moves up: an offset below it answers the current start.
Authorization: Topic DELETE per topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
The new log start is durable before the response, which is therefore sent without waiting for ``timeout``
(a single node has no replicas to wait for); Fetch and ListOffsets read it from the log.
"""

from __future__ import annotations

from typing import Any

import structlog

from kcoord.apis.access import Op, may_topic
from kcoord.apis.error_answers import each_partition
from kcoord.apis.wiring import own_api
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["handle_delete_records"]

logger = structlog.get_logger(__name__)

HIGH_WATERMARK = -1


def _result(index: int, code: ErrorCode, low_watermark: int = -1) -> dict[str, Any]:
    return {"partition_index": index, "low_watermark": low_watermark, "error_code": code}


def delete_records_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": each_partition(request.topics, lambda index: _result(index, code)),
    }


async def handle_delete_records(
    ctx: RequestContext, request: Any, *, topics: TopicManager, authorizer: Authorizer
) -> dict[str, Any]:
    answers = []
    for topic in request.topics:
        if not may_topic(ctx, authorizer, Op.DELETE, topic.name):
            answers += each_partition(
                [topic], lambda index: _result(index, ErrorCode.topic_authorization_failed)
            )
            continue
        results = []
        for part in topic.partitions:
            index = int(part.partition_index)
            try:
                low_watermark = await _delete_before(topics, topic.name, index, int(part.offset))
            except KafkaError as exc:
                results.append(_result(index, exc.code))
                continue
            results.append(_result(index, ErrorCode.none, low_watermark))
        answers.append({"name": topic.name, "partitions": results})
    return {"throttle_time": 0, "topics": answers}


async def _delete_before(topics: TopicManager, name: str, index: int, offset: int) -> int:
    info = topics.get(name)
    partition_log = topics.partition_log(name, index)
    if info is None or partition_log is None:
        raise KafkaError(topics.missing_log_error(name, index))
    if info.internal:
        raise KafkaError(ErrorCode.invalid_topic_exception, f"cannot delete records of internal topic {name}")
    if not partition_log.config.deletes:
        raise KafkaError(ErrorCode.policy_violation, f"cleanup.policy of {name} does not allow deletion")
    target = partition_log.log_end_offset if offset == HIGH_WATERMARK else offset
    if target < 0:
        raise KafkaError(ErrorCode.offset_out_of_range, f"offset {offset} is not an offset")
    low_watermark = await partition_log.delete_records_before(target)
    logger.info("records.deleted", topic=name, partition=index, log_start_offset=low_watermark)
    return low_watermark


api = own_api(
    ApiKey.DELETE_RECORDS, "DeleteRecords", 0, 2, handle_delete_records, delete_records_error_response
)
