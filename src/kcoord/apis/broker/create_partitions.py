"""CreatePartitions (key 37), versions 0-3.

- v0: per topic the new total partition count and optional replica assignments for the new
  partitions; timeout; validate_only; per-topic error code and message.
- v1: no change (throttling behaviour).  v2: flexible.  v3: no change.

INVALID_PARTITIONS unless the count grows; assignments must name exactly the new partitions and
put each on this node (INVALID_REPLICA_ASSIGNMENT otherwise). Internal topics are refused
(INVALID_REQUEST): the coordinator places groups by ``__consumer_offsets``' partition count.
Every topic is checked first; the ones that passed grow in one round
(:meth:`TopicManager.add_partitions_many`: one catalogue write, the new logs a few topics at a
time off the loop). The group coordinator hears of the growth through the topic manager's
listeners; consumers see it in their next Metadata.

Authorization: Topic ALTER per topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op, may_topic
from kcoord.apis.broker.create_topics import TopicAnswer, answer_each_topic, check_assignments
from kcoord.apis.broker.creation_limits import CreationBudget, CreationLimits
from kcoord.apis.wiring import own_api
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["handle_create_partitions"]


def _result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}


def _checked_count(
    topics: TopicManager, node_id: int, topic: Any, validate_only: bool, budget: CreationBudget | None
) -> int:
    """The new partition count ``topic`` asks for, after the checks only the request can make."""
    info = topics.get(topic.name)
    if info is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{topic.name}' does not exist.")
    if info.internal:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Internal topic '{topic.name}' keeps its partition count: groups are placed by it.",
        )
    count = int(topic.count)
    if topic.assignments is not None and count > info.partitions:
        added = count - info.partitions
        if len(topic.assignments) != added:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Increasing the number of partitions by {added} but {len(topic.assignments)} "
                "assignments provided.",
            )
        check_assignments([a.broker_ids for a in topic.assignments], node_id)
    if budget is not None and not validate_only and count > info.partitions:
        refusal = budget.refusal(count - info.partitions)
        if refusal is not None:
            raise KafkaError(*refusal)
    return count


def create_partitions_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "results": [_result(t.name, code, None) for t in request.topics]}


async def handle_create_partitions(
    ctx: RequestContext,
    request: Any,
    *,
    topics: TopicManager,
    node_id: int,
    creation: CreationLimits | None = None,
    authorizer: Authorizer,
) -> dict[str, Any]:
    validate_only = bool(request.validate_only)
    budget = creation.budget(ctx, quota_error=ctx.api_version >= 3) if creation is not None else None

    planned: dict[str, int] = {}

    async def plan(topic: Any) -> TopicAnswer:
        if not may_topic(ctx, authorizer, Op.ALTER, topic.name):
            raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
        planned[topic.name] = _checked_count(topics, node_id, topic, validate_only, budget)
        return _result(topic.name, ErrorCode.none, None)  # replaced by the round's error, if any

    results = await answer_each_topic(request.topics, plan, _result, "Duplicate topic in request.")
    outcomes = await topics.add_partitions_many(list(planned.items()), validate_only) if planned else {}
    for index, result in enumerate(results):
        outcome = outcomes.get(result["name"])
        if isinstance(outcome, KafkaError):
            results[index] = _result(result["name"], outcome.code, outcome.message)
    return {"throttle_time": budget.throttle_ms if budget is not None else 0, "results": results}


api = own_api(
    ApiKey.CREATE_PARTITIONS,
    "CreatePartitions",
    0,
    3,
    handle_create_partitions,
    create_partitions_error_response,
)
