"""CreateTopics (key 19), versions 2-7.

- v2: topics with partitions, replication factor, manual assignments and configs; timeout;
  validate_only; per-topic error code and message; throttle_time.
- v3: no change.  v4: -1 partitions / replication factor mean the broker defaults (KIP-464).
- v5: flexible; a created topic's result carries its partition count, replication factor and
  every topic config with its source (KIP-525).
- v6: no change to the body (quota errors).  v7: the result carries the topic id.

kafka-python sends v7, librdkafka v4, aiokafka v3. Every topic is checked first; then the ones
that passed are created in one round (:meth:`TopicManager.create_many`: their logs a few at a
time off the loop, one catalogue write), and the response is sent once every log exists, so
``timeout`` never expires. A name that appears
twice in one request gets one INVALID_REQUEST result and is not created, as in Kafka.

Authorization: Cluster CREATE, or Topic CREATE per topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kcoord.apis.access import Op, may_cluster, may_topic
from kcoord.apis.broker.creation_limits import CreationBudget, CreationLimits
from kcoord.apis.wiring import own_api
from kcoord.cluster.topic_configs import ConfigEntry, describe_topic_configs
from kcoord.cluster.topic_manager import NewTopic, TopicInfo, TopicManager
from kcoord.config import Settings
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["answer_each_topic", "check_assignments", "config_results", "handle_create_topics"]

_ZERO_UUID = uuid.UUID(int=0)


def check_assignments(broker_ids_per_partition: Sequence[Sequence[int]], node_id: int) -> None:
    """Manual replica assignments are legal only when every partition lives on this one node."""
    for index, broker_ids in enumerate(broker_ids_per_partition):
        if list(broker_ids) != [node_id]:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Partition {index} is assigned to brokers {list(broker_ids)}; the only broker is {node_id}.",
            )


TopicAnswer = dict[str, Any]


async def answer_each_topic(
    requested: Sequence[Any],
    answer: Callable[[Any], Awaitable[TopicAnswer]],
    error: Callable[[str, ErrorCode, str | None], TopicAnswer],
    duplicate_message: str,
) -> list[TopicAnswer]:
    """One answer per distinct topic name, in request order, as Kafka's topic admin APIs give.

    A name requested more than once is refused once with INVALID_REQUEST (``duplicate_message``,
    ``{name}`` filled in) and not acted on; a :class:`KafkaError` from ``answer`` becomes that
    topic's error.
    """
    counts = Counter(t.name for t in requested)
    results: list[TopicAnswer] = []
    reported: set[str] = set()
    for topic in requested:
        if topic.name in reported:
            continue
        reported.add(topic.name)
        if counts[topic.name] > 1:
            results.append(
                error(topic.name, ErrorCode.invalid_request, duplicate_message.format(name=topic.name))
            )
            continue
        try:
            results.append(await answer(topic))
        except KafkaError as exc:
            results.append(error(topic.name, exc.code, exc.message))
    return results


def config_results(entries: Sequence[ConfigEntry]) -> list[dict[str, Any]]:
    return [
        {
            "name": entry.name,
            "value": entry.value,
            "read_only": entry.read_only,
            "config_source": int(entry.source),
            "is_sensitive": False,
        }
        for entry in entries
    ]


def _topic_error(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "topic_id": _ZERO_UUID,
        "error_code": code,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": None,
    }


def _planned(
    topics: TopicManager, node_id: int, topic: Any, validate_only: bool, budget: CreationBudget | None = None
) -> NewTopic:
    """What creating ``topic`` asks of the topic manager, after the checks only the request can make."""
    partitions = int(topic.num_partitions)
    replication_factor = int(topic.replication_factor)
    assignments = sorted(topic.assignments, key=lambda a: int(a.partition_index))
    if assignments:
        if partitions != -1 or replication_factor != -1:
            raise KafkaError(
                ErrorCode.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        indexes = [int(a.partition_index) for a in assignments]
        if indexes != list(range(len(indexes))):
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Partitions must be numbered consecutively from 0, not {indexes}.",
            )
        check_assignments([a.broker_ids for a in assignments], node_id)
        partitions, replication_factor = len(assignments), 1
    configs = {c.name: c.value for c in topic.configs}
    if budget is not None and not validate_only and topics.get(topic.name) is None:
        refusal = budget.refusal(partitions if partitions != -1 else topics.default_partitions)
        if refusal is not None:
            raise KafkaError(*refusal)
    return NewTopic(topic.name, partitions, replication_factor, configs)


def _created(info: TopicInfo, settings: Settings) -> dict[str, Any]:
    return {
        "name": info.name,
        "topic_id": info.topic_id,
        "error_code": ErrorCode.none,
        "error_message": None,
        "num_partitions": info.partitions,
        "replication_factor": 1,
        "configs": config_results(describe_topic_configs(info.configs, settings)),
    }


def create_topics_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "topics": [_topic_error(t.name, code, None) for t in request.topics]}


async def handle_create_topics(
    ctx: RequestContext,
    request: Any,
    *,
    topics: TopicManager,
    settings: Settings,
    node_id: int,
    creation: CreationLimits | None = None,
    authorizer: Authorizer,
) -> dict[str, Any]:
    """Cluster CREATE allows every topic; otherwise Topic CREATE per topic (TOPIC_AUTHORIZATION_FAILED)."""
    validate_only = bool(getattr(request, "validate_only", False))
    budget = creation.budget(ctx, quota_error=ctx.api_version >= 6) if creation is not None else None
    cluster_create = may_cluster(ctx, authorizer, Op.CREATE)

    planned: dict[str, NewTopic] = {}

    async def plan(topic: Any) -> TopicAnswer:
        if not cluster_create and not may_topic(ctx, authorizer, Op.CREATE, topic.name):
            raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
        planned[topic.name] = _planned(topics, node_id, topic, validate_only, budget)
        return {"name": topic.name}  # answered once the round below has run

    results = await answer_each_topic(
        request.topics,
        plan,
        _topic_error,
        "Create topics request contains multiple entries for the topic {name}.",
    )
    outcomes = await topics.create_many(list(planned.values()), validate_only) if planned else {}
    answers: list[TopicAnswer] = []
    for result in results:
        name = result["name"]
        if name not in planned:  # refused before the round
            answers.append(result)
            continue
        outcome = outcomes.get(name) or KafkaError(ErrorCode.unknown_server_error, f"{name} was not created")
        if isinstance(outcome, KafkaError):
            answers.append(_topic_error(name, outcome.code, outcome.message))
        else:
            answers.append(_created(outcome, settings))
    return {"throttle_time": budget.throttle_ms if budget is not None else 0, "topics": answers}


api = own_api(ApiKey.CREATE_TOPICS, "CreateTopics", 2, 7, handle_create_topics, create_topics_error_response)
