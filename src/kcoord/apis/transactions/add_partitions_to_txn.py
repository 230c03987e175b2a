"""AddPartitionsToTxn (key 24), versions 0-3: a producer adds partitions to its transaction.

- v0: transactional id, producer id and epoch, topics with partitions -> an error per partition.
- v1: no change (a throttled response is sent before throttling).
- v2: PRODUCER_FENCED may be answered (KIP-588; older versions get INVALID_PRODUCER_EPOCH).
- v3: flexible.

v4 (KIP-890: batched transactions and the brokers' verify-only form) is not served: brokers send
it to each other, and kcoord verifies a transactional Produce in process (contract C). The
coordinator answers one error for the whole request, repeated for every partition.

Authorization: TransactionalId WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
partition) and Topic WRITE per topic (TOPIC_AUTHORIZATION_FAILED for those partitions,
OPERATION_NOT_ATTEMPTED for the others). A partition that does not exist is
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as Kafka answers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kcoord.apis.access import Op, may_topic
from kcoord.apis.transactions.common import may_transactional_id
from kcoord.coordinator.transactions import AddPartitionsToTxnRequest, TopicPartition, fenced_error_for
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext
from kcoord.storage.api import TopicInfo

TopicOf = Callable[[str], TopicInfo | None]
"""The topic catalogue's look-up by name."""


def _partitions(request: Any) -> list[TopicPartition]:
    return [
        TopicPartition(topic.name, int(partition))
        for topic in request.v3_and_below_topics
        for partition in topic.partitions
    ]


def _answer(partitions: list[TopicPartition], errors: dict[TopicPartition, ErrorCode]) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_error_code": errors[tp]}
        )
    return {
        "results_by_topic_v3_and_below": [
            {"name": name, "results_by_partition": results} for name, results in topics.items()
        ]
    }


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    partitions = _partitions(request)
    return _answer(partitions, dict.fromkeys(partitions, code))


def api(transactions: TransactionCoordinator, topic_of: TopicOf, *, authorizer: Authorizer) -> ApiSpec:
    handler = functools.partial(
        handle_add_partitions_to_txn, transactions=transactions, topic_of=topic_of, authorizer=authorizer
    )
    return ApiSpec(ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 3, handler, _error_response)


async def handle_add_partitions_to_txn(
    ctx: RequestContext,
    request: Any,
    *,
    transactions: TransactionCoordinator,
    topic_of: TopicOf,
    authorizer: Authorizer,
) -> dict[str, Any]:
    transactional_id = request.v3_and_below_transactional_id
    partitions = _partitions(request)
    if not may_transactional_id(ctx, authorizer, Op.WRITE, transactional_id):
        return _answer(partitions, dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed))
    refused: dict[TopicPartition, ErrorCode] = {}
    for tp in partitions:
        info: TopicInfo | None = topic_of(tp.topic)
        if not may_topic(ctx, authorizer, Op.WRITE, tp.topic):
            refused[tp] = ErrorCode.topic_authorization_failed
        elif info is None or not 0 <= tp.partition < info.partitions:
            refused[tp] = ErrorCode.unknown_topic_or_partition
    if refused:
        return _answer(
            partitions, {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in partitions}
        )
    try:
        error = await transactions.add_partitions(
            AddPartitionsToTxnRequest(
                transactional_id,
                int(request.v3_and_below_producer_id),
                int(request.v3_and_below_producer_epoch),
                tuple(partitions),
            )
        )
    except KafkaError as exc:
        error = exc.code
    error = fenced_error_for("AddPartitionsToTxn", ctx.api_version, error)
    return _answer(partitions, dict.fromkeys(partitions, error))
