"""EndTxn (key 26), versions 0-4: a producer commits or aborts its transaction.

- v0: transactional id, producer id and epoch, committed -> error.
- v1: no change (a throttled response is sent before throttling).
- v2: PRODUCER_FENCED may be answered (KIP-588; older versions get INVALID_PRODUCER_EPOCH).
- v3: flexible.
- v4: TRANSACTION_ABORTABLE may be answered (KIP-890; kcoord does not answer it).

v5 (KIP-890 part 2: the epoch bumped by every EndTxn) is not served, and ``transaction.version``
is not advertised, so clients stay on the protocol of transaction version 1.

The answer is released once the decision (PrepareCommit/PrepareAbort) is durable in
``__transaction_state``; the markers are written after it, as Kafka does.

Authorization: TransactionalId WRITE, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from kcoord.apis.access import Op
from kcoord.apis.transactions.common import (
    TransactionApi,
    error_code_answer,
    fenced_answer,
    require_transactional_id,
)
from kcoord.coordinator.transactions import EndTxnRequest, EndTxnResponse
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


async def handle_end_txn(
    ctx: RequestContext, request: Any, *, transactions: TransactionCoordinator, authorizer: Authorizer
) -> dict[str, Any]:
    require_transactional_id(ctx, authorizer, Op.WRITE, request.transactional_id)
    ended = transactions.end_txn(
        EndTxnRequest(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            bool(request.committed),
        )
    )
    return await fenced_answer("EndTxn", ctx, _error_of(ended))


api = TransactionApi(ApiKey.END_TXN, "EndTxn", 0, 4, handle_end_txn, error_code_answer)


async def _error_of(ended: Awaitable[EndTxnResponse]) -> ErrorCode:
    return (await ended).error
