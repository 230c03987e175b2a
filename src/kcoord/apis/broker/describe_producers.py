"""DescribeProducers (key 61), version 0: the active producers of partitions (KIP-664).

- v0: flexible; per partition, each producer's id, epoch, last sequence, last timestamp,
  coordinator epoch (of the last marker written for it, -1 before any) and the first offset of
  its open transaction there (-1 when none is open).

Sent by ``kafka-transactions.sh describe-producers`` and the admin clients' ``describeProducers``.
Answered from the partition's producer state (:mod:`kcoord.cluster.producer_state`), which holds
producers seen since the state was rebuilt at start or on claim: a producer restored from the log
has no last timestamp (-1) until it writes again.

Per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist;
NOT_LEADER_OR_FOLLOWER for one another node holds. Authorization: Topic READ per topic, as Kafka,
else TOPIC_AUTHORIZATION_FAILED for its partitions.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op, may_topic
from kcoord.apis.wiring import own_api
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["api", "handle_describe_producers"]


def _partition(index: int, code: ErrorCode, producers: list[dict[str, int]] | None = None) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": code,
        "error_message": None,
        "active_producers": producers or [],
    }


def describe_producers_error(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [
            {"name": t.name, "partitions": [_partition(int(i), code) for i in t.partition_indexes]}
            for t in request.topics
        ],
    }


async def handle_describe_producers(
    ctx: RequestContext,
    request: Any,
    *,
    topics: TopicManager,
    producers: ProducerStateManager,
    authorizer: Authorizer,
) -> dict[str, Any]:
    answers = []
    for topic in request.topics:
        allowed = may_topic(ctx, authorizer, Op.READ, topic.name)
        partitions = []
        for raw in topic.partition_indexes:
            index = int(raw)
            if not allowed:
                partitions.append(_partition(index, ErrorCode.topic_authorization_failed))
            elif topics.partition_log(topic.name, index) is None:
                partitions.append(_partition(index, topics.missing_log_error(topic.name, index)))
            else:
                partitions.append(_partition(index, ErrorCode.none, _active(producers, topic.name, index)))
        answers.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": answers}


def _active(producers: ProducerStateManager, topic: str, partition: int) -> list[dict[str, int]]:
    return [
        {
            "producer_id": view.producer_id,
            "producer_epoch": view.epoch,
            "last_sequence": view.last_sequence,
            "last_timestamp": view.last_timestamp,
            "coordinator_epoch": view.coordinator_epoch,
            "current_txn_start_offset": view.transaction_start_offset,
        }
        for view in producers.describe(topic, partition)
    ]


api = own_api(
    ApiKey.DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0, handle_describe_producers, describe_producers_error
)
