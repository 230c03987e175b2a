"""InitProducerId (key 22), versions 0-5: producer ids for idempotent and transactional producers.

- v0: transactional_id, transaction_timeout_ms -> producer_id, producer_epoch.
- v1: no change (a throttled response is sent before throttling).
- v2: flexible.
- v3: the request may carry the producer's current id and epoch (KIP-360); a known id at its
  current epoch gets the epoch bumped instead of a new id.
- v4: PRODUCER_FENCED may be returned in place of INVALID_PRODUCER_EPOCH (KIP-588).
- v5: no change in layout (KIP-890's clients send it; kcoord keeps transaction version 1).

kafka-python's producer enables idempotence by default and aborts every batch without this API.

Without a transactional id, ids and epochs come from
:class:`kcoord.cluster.producer_state.ProducerStateManager`; ids are unique across the nodes of a
cluster, and COORDINATOR_LOAD_IN_PROGRESS (retriable) answers while a block of ids cannot be
reserved, as Kafka answers while its next block has not arrived.

With a transactional id the transaction coordinator answers
(:class:`kcoord.runtime.transaction_coordinator.TransactionCoordinator`): the id's epoch is bumped,
which fences any older producer of the id and aborts its open transaction (answering
CONCURRENT_TRANSACTIONS until the abort is written; the client retries); a
``transaction_timeout_ms`` over ``transaction.max.timeout.ms`` is INVALID_TRANSACTION_TIMEOUT.

Authorization: with a transactional id, TransactionalId WRITE (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without, Cluster IDEMPOTENT_WRITE or WRITE on some topic
(KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op, may, may_cluster
from kcoord.apis.wiring import own_api
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.coordinator.transactions import InitProducerIdRequest, fenced_error_for
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def init_producer_id_error(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "producer_id": -1, "producer_epoch": -1}


async def handle_init_producer_id(
    ctx: RequestContext,
    request: Any,
    *,
    producers: ProducerStateManager,
    authorizer: Authorizer,
    transactions: TransactionCoordinator | None = None,
) -> dict[str, Any]:
    if request.transactional_id is not None:
        return await _init_transactional(ctx, request, transactions, authorizer)
    if not _may_write_idempotently(ctx, authorizer):
        raise KafkaError(ErrorCode.cluster_authorization_failed, "IdempotentWrite is not authorized.")
    producer_id, epoch = await producers.init_producer(
        int(getattr(request, "producer_id", -1)), int(getattr(request, "producer_epoch", -1))
    )
    return {"error_code": ErrorCode.none, "producer_id": producer_id, "producer_epoch": epoch}


def _may_write_idempotently(ctx: RequestContext, authorizer: Authorizer) -> bool:
    """Cluster IDEMPOTENT_WRITE, or (Kafka 3+, KIP-679) WRITE on some topic."""
    return may_cluster(ctx, authorizer, Op.IDEMPOTENT_WRITE) or authorizer.authorize_any(
        ctx.principal, ctx.client_host, Op.WRITE, ResourceType.TOPIC
    )


async def _init_transactional(
    ctx: RequestContext, request: Any, transactions: TransactionCoordinator | None, authorizer: Authorizer
) -> dict[str, Any]:
    transactional_id: str = request.transactional_id
    if not may(ctx, authorizer, Op.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        raise KafkaError(
            ErrorCode.transactional_id_authorization_failed,
            f"TransactionalId WRITE on {transactional_id!r} is not authorized.",
        )
    if transactions is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "no transaction coordinator on this node")
    timeout = request.transaction_timeout
    timeout_ms = round(timeout.total_seconds() * 1000) if hasattr(timeout, "total_seconds") else int(timeout)
    response = await transactions.init_producer_id(
        InitProducerIdRequest(
            transactional_id,
            timeout_ms,
            int(getattr(request, "producer_id", -1)),
            int(getattr(request, "producer_epoch", -1)),
        )
    )
    return {
        "error_code": fenced_error_for("InitProducerId", ctx.api_version, response.error),
        "producer_id": response.producer_id,
        "producer_epoch": response.producer_epoch,
    }


api = own_api(
    ApiKey.INIT_PRODUCER_ID, "InitProducerId", 0, 5, handle_init_producer_id, init_producer_id_error
)
