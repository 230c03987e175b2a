"""AddOffsetsToTxn (key 25), versions 0-3: a producer adds a group's offsets to its transaction.

- v0: transactional id, producer id and epoch, group id -> error.
- v1: no change (a throttled response is sent before throttling).
- v2: PRODUCER_FENCED may be answered (KIP-588; older versions get INVALID_PRODUCER_EPOCH).
- v3: flexible.

The coordinator adds the group's ``__consumer_offsets`` partition to the transaction, so the
commit or abort marker also goes there (the group's pending TxnOffsetCommits become visible or
are dropped).

Authorization: TransactionalId WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Group
READ (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op, may_group
from kcoord.apis.transactions.common import (
    TransactionApi,
    error_code_answer,
    fenced_answer,
    require_transactional_id,
)
from kcoord.coordinator.transactions import AddOffsetsToTxnRequest
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


async def handle_add_offsets_to_txn(
    ctx: RequestContext, request: Any, *, transactions: TransactionCoordinator, authorizer: Authorizer
) -> dict[str, Any]:
    require_transactional_id(ctx, authorizer, Op.WRITE, request.transactional_id)
    if not may_group(ctx, authorizer, Op.READ, request.group_id):
        return {"error_code": ErrorCode.group_authorization_failed}
    added = transactions.add_offsets(
        AddOffsetsToTxnRequest(
            request.transactional_id, int(request.producer_id), int(request.producer_epoch), request.group_id
        )
    )
    return await fenced_answer("AddOffsetsToTxn", ctx, added)


api = TransactionApi(
    ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 3, handle_add_offsets_to_txn, error_code_answer
)
