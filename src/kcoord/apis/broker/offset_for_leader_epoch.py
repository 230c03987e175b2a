"""OffsetForLeaderEpoch (key 23), versions 2-4: where a leader epoch of a partition ended (KIP-101,
KIP-320).

- v0-v1 (followers only, and dropped by Kafka 4.0) are not served; kio has no schema for them.
- v2: ``current_leader_epoch`` per partition (KIP-320: consumers validate their position after
  a leader change); the response has ``throttle_time`` and per partition ``leader_epoch`` and
  ``end_offset``. librdkafka sends v2 only; kafka-python and Java's consumer v3+.
- v3: ``replica_id`` (-1 from a consumer; kcoord has no followers, so it answers every asker alike).
- v4: flexible.

A consumer asks with the epoch of the last record it consumed (or of its committed offset) and the
epoch its metadata names; it checks that the end offset is not below its position. The rules are
Kafka's ``ReplicaManager.lastOffsetForLeaderEpoch`` and ``Partition.lastOffsetForLeaderEpoch``
(:mod:`kcoord.cluster.leader_epochs`): an unknown partition => UNKNOWN_TOPIC_OR_PARTITION;
another node leads it => NOT_LEADER_OR_FOLLOWER; ``current_leader_epoch`` older => FENCED_LEADER_EPOCH,
newer => UNKNOWN_LEADER_EPOCH; the database unreachable => KAFKA_STORAGE_ERROR (retriable).

Authorization, as Kafka's: Cluster CLUSTER_ACTION (what a follower broker has) or Topic DESCRIBE
per topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op, may_cluster, may_topic
from kcoord.apis.error_answers import each_partition
from kcoord.apis.wiring import own_api
from kcoord.cluster.leader_epochs import EpochEnd, EpochHistory, end_offset_for, led_log
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["handle_offset_for_leader_epoch"]


def _result(index: int, code: ErrorCode, end: EpochEnd | None = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "partition": index,
        "leader_epoch": -1 if end is None else end.epoch,
        "end_offset": -1 if end is None else end.end_offset,
    }


def offset_for_leader_epoch_error(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": each_partition(
            request.topics,
            lambda index: _result(index, code),
            topic_field="topic",
            partition_field="partition",
        ),
    }


async def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: Any, *, topics: TopicManager, history: EpochHistory, authorizer: Authorizer
) -> dict[str, Any]:
    cluster_action = may_cluster(ctx, authorizer, Op.CLUSTER_ACTION)
    answers = []
    for topic in request.topics:
        if not cluster_action and not may_topic(ctx, authorizer, Op.DESCRIBE, topic.topic):
            denied = ErrorCode.topic_authorization_failed
            answers.append(
                {
                    "topic": topic.topic,
                    "partitions": [_result(int(p.partition), denied) for p in topic.partitions],
                }
            )
            continue
        results = [
            await _end_of_epoch(
                topics,
                history,
                topic.topic,
                int(p.partition),
                int(p.current_leader_epoch),
                int(p.leader_epoch),
            )
            for p in topic.partitions
        ]
        answers.append({"topic": topic.topic, "partitions": results})
    return {"throttle_time": 0, "topics": answers}


async def _end_of_epoch(
    topics: TopicManager, history: EpochHistory, topic: str, index: int, current_epoch: int, requested: int
) -> dict[str, Any]:
    partition_log, error = led_log(topics, topic, index, current_epoch)
    if partition_log is None:
        return _result(index, error)
    leader_epoch = partition_log.leader_epoch
    below = above = None
    if 0 <= requested < leader_epoch:
        try:
            below, above = await history.around(topic, index, requested, leader_epoch)
        except KafkaError as exc:
            return _result(index, exc.code)
    end = end_offset_for(requested, leader_epoch, partition_log.log_end_offset, below, above)
    return _result(index, ErrorCode.none, end)


api = own_api(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    "OffsetForLeaderEpoch",
    2,
    4,
    handle_offset_for_leader_epoch,
    offset_for_leader_epoch_error,
)
