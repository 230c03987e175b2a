"""InitProducerId (key 22), versions 0-4: producer ids for idempotent producers.

- v0: transactional_id, transaction_timeout_ms -> producer_id, producer_epoch.
- v1: no change (a throttled response is sent before throttling).
- v2: flexible.
- v3: the request may carry the producer's current id and epoch (KIP-360); a known id at its
  current epoch gets the epoch bumped instead of a new id.
- v4: PRODUCER_FENCED may be returned in place of INVALID_PRODUCER_EPOCH (not used here).

kafka-python's producer enables idempotence by default and aborts every batch without this API.

kcoord has no transaction coordinator: a non-null ``transactional_id`` is answered with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, what Kafka answers a client that may not use the id; clients
treat it as fatal rather than retrying. Ids and epochs come from
:class:`kcoord.cluster.producer_state.ProducerStateManager`; ids are unique across the nodes of a
cluster, and COORDINATOR_LOAD_IN_PROGRESS (retriable) answers while a block of ids cannot be
reserved, as Kafka answers while its next block has not arrived.

Authorization: Cluster IDEMPOTENT_WRITE or WRITE on some topic (KIP-679), else
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import functools
from typing import Any

from kcoord.apis.access import Op, may_cluster
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def init_producer_id_error(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "producer_id": -1, "producer_epoch": -1}


def api(producers: ProducerStateManager, *, authorizer: Authorizer) -> ApiSpec:
    handler = functools.partial(handle_init_producer_id, producers=producers, authorizer=authorizer)
    return ApiSpec(ApiKey.INIT_PRODUCER_ID, "InitProducerId", 0, 4, handler, init_producer_id_error)


async def handle_init_producer_id(
    ctx: RequestContext, request: Any, *, producers: ProducerStateManager, authorizer: Authorizer
) -> dict[str, Any]:
    if request.transactional_id is not None:
        raise KafkaError(
            ErrorCode.transactional_id_authorization_failed, "kcoord does not support transactions"
        )
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
