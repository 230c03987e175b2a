"""DescribeTransactions (key 65), version 0: operators look at transactional ids.

- v0: transactional ids -> per id: error, state, timeout, start time, producer id and epoch,
  and the partitions in the transaction by topic.

An id whose coordinator partition is elsewhere answers NOT_COORDINATOR, one still loading
COORDINATOR_LOAD_IN_PROGRESS, an unknown one TRANSACTIONAL_ID_NOT_FOUND.

Authorization: TransactionalId DESCRIBE per id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
partitions of topics the principal may not DESCRIBE are left out, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op, may_topic
from kcoord.apis.transactions.common import TransactionApi, may_transactional_id
from kcoord.coordinator.transactions import DescribedTransaction
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def _state(transactional_id: str, error: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": error,
        "transactional_id": transactional_id,
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": 0,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"transaction_states": [_state(tid, code) for tid in request.transactional_ids]}


async def handle_describe_transactions(
    ctx: RequestContext, request: Any, *, transactions: TransactionCoordinator, authorizer: Authorizer
) -> dict[str, Any]:
    states = []
    for transactional_id in request.transactional_ids:
        if not may_transactional_id(ctx, authorizer, Op.DESCRIBE, transactional_id):
            states.append(_state(transactional_id, ErrorCode.transactional_id_authorization_failed))
            continue
        try:
            described: DescribedTransaction = transactions.describe(transactional_id)
        except KafkaError as exc:
            states.append(_state(transactional_id, exc.code))
            continue
        if described.error is not ErrorCode.none:
            states.append(_state(transactional_id, described.error))
            continue
        states.append(
            {
                "error_code": ErrorCode.none,
                "transactional_id": transactional_id,
                "transaction_state": described.state,
                "transaction_timeout": described.timeout_ms,
                "transaction_start_time": described.start_ms,
                "producer_id": described.producer_id,
                "producer_epoch": described.producer_epoch,
                "topics": [
                    {"topic": topic, "partitions": list(partitions)}
                    for topic, partitions in described.topics
                    if may_topic(ctx, authorizer, Op.DESCRIBE, topic)
                ],
            }
        )
    return {"transaction_states": states}


api = TransactionApi(
    ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0, handle_describe_transactions, _error_response
)
