"""What the transaction APIs share: their wiring, the TransactionalId ACL checks and the
error-code-only answer."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from kcoord.apis.access import Op, may
from kcoord.apis.wiring import OnePartApi
from kcoord.coordinator.transactions import fenced_error_for
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


class TransactionApi(OnePartApi[TransactionCoordinator]):
    """A transaction API: its handler takes the transaction coordinator (``transactions``) and the
    authorizer."""

    __slots__ = ()
    part = "transactions"


def may_transactional_id(ctx: RequestContext, authorizer: Authorizer, op: Op, transactional_id: str) -> bool:
    return may(ctx, authorizer, op, ResourceType.TRANSACTIONAL_ID, transactional_id)


def require_transactional_id(
    ctx: RequestContext, authorizer: Authorizer, op: Op, transactional_id: str
) -> None:
    """Raises TRANSACTIONAL_ID_AUTHORIZATION_FAILED unless the principal may do ``op`` to the id."""
    if not may_transactional_id(ctx, authorizer, op, transactional_id):
        raise KafkaError(
            ErrorCode.transactional_id_authorization_failed,
            f"TransactionalId {op.name} on {transactional_id!r} is not authorized.",
        )


def error_code_answer(request: Any, code: ErrorCode) -> dict[str, Any]:
    """The whole answer of an API that answers one error code (AddOffsetsToTxn, EndTxn)."""
    return {"error_code": code}


async def fenced_answer(api_name: str, ctx: RequestContext, pending: Awaitable[ErrorCode]) -> dict[str, Any]:
    """The error-code-only answer of a coordinator call: its code, or the one it raised, as the
    request's version spells a fenced producer."""
    try:
        error = await pending
    except KafkaError as exc:
        error = exc.code
    return error_code_answer(None, fenced_error_for(api_name, ctx.api_version, error))
