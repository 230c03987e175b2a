"""What the transaction APIs share: the TransactionalId ACL checks."""

from __future__ import annotations

from kcoord.apis.access import Op, may
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


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
